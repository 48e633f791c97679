"""The bundled corpus's conciliar documents: the First and Second Vatican Councils."""

from __future__ import annotations

from magisterium_async.testing.emulator.content._library._entry import Entry

__all__ = ["COUNCILS"]

COUNCILS: tuple[Entry, ...] = (
    (
        "10234",
        "Lumen Gentium",
        "Dogmatic Constitution on the Church",
        "Second Vatican Council",
        1964,
        "AAS 57 (1965) 5-71",
        "Chapter I: The Mystery of the Church",
        "Christ is the Light of nations. Because this is so, this Sacred Synod gathered "
        "together in the Holy Spirit eagerly desires, by proclaiming the Gospel to every "
        "creature, to bring the light of Christ to all men, a light brightly visible on the "
        "countenance of the Church.",
    ),
    (
        "10235",
        "Dei Verbum",
        "Dogmatic Constitution on Divine Revelation",
        "Second Vatican Council",
        1965,
        "AAS 58 (1966) 817-836",
        "Chapter I: Revelation Itself",
        "In His goodness and wisdom God chose to reveal Himself and to make known to us the "
        "hidden purpose of His will, by which through Christ, the Word made flesh, man might "
        "in the Holy Spirit have access to the Father and come to share in the divine nature. "
        "Sacred tradition and Sacred Scripture form one sacred deposit of the word of God, "
        "committed to the Church.",
    ),
    (
        "10236",
        "Sacrosanctum Concilium",
        "Constitution on the Sacred Liturgy",
        "Second Vatican Council",
        1963,
        "AAS 56 (1964) 97-138",
        "Chapter I: General Principles for the Restoration and Promotion of the Sacred Liturgy",
        "The liturgy is the summit toward which the activity of the Church is directed; at "
        "the same time it is the font from which all her power flows. Mother Church earnestly "
        "desires that all the faithful should be led to that fully conscious, and active "
        "participation in liturgical celebrations.",
    ),
    (
        "10237",
        "Gaudium et Spes",
        "Pastoral Constitution on the Church in the Modern World",
        "Second Vatican Council",
        1965,
        "AAS 58 (1966) 1025-1120",
        "Preface",
        "The joys and the hopes, the griefs and the anxieties of the men of this age, "
        "especially those who are poor or in any way afflicted, these are the joys and hopes, "
        "the griefs and anxieties of the followers of Christ.",
    ),
    (
        "10238",
        "Dignitatis Humanae",
        "Declaration on Religious Freedom",
        "Second Vatican Council",
        1965,
        "AAS 58 (1966) 929-946",
        "Introduction",
        "A sense of the dignity of the human person has been impressing itself more and more "
        "deeply on the consciousness of contemporary man. This Vatican Council declares that "
        "the human person has a right to religious freedom.",
    ),
    (
        "10239",
        "Nostra Aetate",
        "Declaration on the Relation of the Church to Non-Christian Religions",
        "Second Vatican Council",
        1965,
        "AAS 58 (1966) 740-744",
        "Introduction",
        "In our time, when day by day mankind is being drawn closer together, and the ties "
        "between different peoples are becoming stronger, the Church examines more closely "
        "her relationship to non-Christian religions. The Catholic Church rejects nothing "
        "that is true and holy in these religions.",
    ),
    (
        "10240",
        "Unitatis Redintegratio",
        "Decree on Ecumenism",
        "Second Vatican Council",
        1964,
        "AAS 57 (1965) 90-112",
        "Introduction",
        "The restoration of unity among all Christians is one of the principal concerns of "
        "the Second Vatican Ecumenical Council. Christ the Lord founded one Church and one "
        "Church only.",
    ),
    (
        "10241",
        "Ad Gentes",
        "Decree on the Mission Activity of the Church",
        "Second Vatican Council",
        1965,
        "AAS 58 (1966) 947-990",
        "Preface",
        "Divinely sent to the nations of the world to be unto them a universal sacrament of "
        "salvation, the Church, driven by the inner necessity of her own catholicity, and "
        "obeying the mandate of her Founder, strives ever to proclaim the Gospel to all men.",
    ),
    (
        "10242",
        "Apostolicam Actuositatem",
        "Decree on the Apostolate of the Laity",
        "Second Vatican Council",
        1965,
        "AAS 58 (1966) 837-864",
        "Introduction",
        "To intensify the apostolic activity of the people of God, the most holy synod "
        "earnestly addresses itself to the laity, whose proper and indispensable role in the "
        "mission of the Church it has already called to mind in other documents.",
    ),
    (
        "10243",
        "Dei Filius",
        "Dogmatic Constitution on the Catholic Faith",
        "First Vatican Council",
        1870,
        "DS 3000-3045",
        "Chapter 2: On Revelation",
        "The same Holy Mother Church holds and teaches that God, the source and end of all "
        "things, can be known with certainty from the consideration of created things, by "
        "the natural power of human reason.",
    ),
    (
        "10244",
        "Pastor Aeternus",
        "First Dogmatic Constitution on the Church of Christ",
        "First Vatican Council",
        1870,
        "DS 3050-3075",
        "Chapter 4: On the Infallible Teaching Authority of the Roman Pontiff",
        "When the Roman Pontiff speaks ex cathedra, that is, when, in the exercise of his "
        "office as shepherd and teacher of all Christians, he defines a doctrine concerning "
        "faith or morals to be held by the whole Church, he possesses that infallibility "
        "which the divine Redeemer willed his Church to enjoy.",
    ),
)
