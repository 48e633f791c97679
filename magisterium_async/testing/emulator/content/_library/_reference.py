"""The bundled corpus's reference works: sections of the Catechism of the Catholic Church
and a canon of the Code of Canon Law.
"""

from __future__ import annotations

from magisterium_async.testing.emulator.content._library._entry import Entry

__all__ = ["REFERENCE"]

REFERENCE: tuple[Entry, ...] = (
    (
        "20001",
        "Catechism of the Catholic Church, 1",
        "The Life of Man: To Know and Love God",
        "Pope John Paul II",
        1992,
        "CCC 1",
        "Prologue",
        "God, infinitely perfect and blessed in himself, in a plan of sheer goodness freely "
        "created man to make him share in his own blessed life. For this reason, at every time "
        "and in every place, God draws close to man.",
    ),
    (
        "20002",
        "Catechism of the Catholic Church, 1213",
        "The Sacrament of Baptism",
        "Pope John Paul II",
        1992,
        "CCC 1213",
        "Part Two, Article 1: The Sacrament of Baptism",
        "Holy Baptism is the basis of the whole Christian life, the gateway to life in the "
        "Spirit, and the door which gives access to the other sacraments. Through Baptism we "
        "are freed from sin and reborn as sons of God.",
    ),
    (
        "20003",
        "Catechism of the Catholic Church, 1324",
        "The Sacrament of the Eucharist",
        "Pope John Paul II",
        1992,
        "CCC 1324",
        "Part Two, Article 3: The Sacrament of the Eucharist",
        "The Eucharist is the source and summit of the Christian life. The other sacraments, "
        "and indeed all ecclesiastical ministries and works of the apostolate, are bound up "
        "with the Eucharist and are oriented toward it.",
    ),
    (
        "20004",
        "Catechism of the Catholic Church, 1422",
        "The Sacrament of Penance and Reconciliation",
        "Pope John Paul II",
        1992,
        "CCC 1422",
        "Part Two, Article 4: The Sacrament of Penance and Reconciliation",
        "Those who approach the sacrament of Penance obtain pardon from God's mercy for the "
        "offense committed against him, and are, at the same time, reconciled with the Church "
        "which they have wounded by their sins.",
    ),
    (
        "20005",
        "Catechism of the Catholic Church, 1822",
        "The Theological Virtue of Charity",
        "Pope John Paul II",
        1992,
        "CCC 1822",
        "Part Three, Article 7: The Virtues",
        "Charity is the theological virtue by which we love God above all things for his own "
        "sake, and our neighbor as ourselves for the love of God.",
    ),
    (
        "20006",
        "Catechism of the Catholic Church, 2559",
        "What is Prayer?",
        "Pope John Paul II",
        1992,
        "CCC 2559",
        "Part Four: Christian Prayer",
        "Prayer is the raising of one's mind and heart to God or the requesting of good things "
        "from God. Humility is the foundation of prayer.",
    ),
    (
        "20007",
        "Code of Canon Law, can. 1752",
        "Canon on the Salvation of Souls",
        "Pope John Paul II",
        1983,
        "CIC can. 1752",
        "Book VII, Part V",
        "Canonical equity is to be observed, keeping in mind the salvation of souls, which "
        "must always be the supreme law in the Church.",
    ),
)
