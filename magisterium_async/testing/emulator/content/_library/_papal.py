"""The bundled corpus's papal documents, Pius IX to Francis: encyclicals, apostolic
constitutions and exhortations.
"""

from __future__ import annotations

from magisterium_async.testing.emulator.content._library._entry import Entry

__all__ = ["PAPAL"]

PAPAL: tuple[Entry, ...] = (
    (
        "10301",
        "Ineffabilis Deus",
        "Apostolic Constitution defining the Immaculate Conception",
        "Pope Pius IX",
        1854,
        "DS 2800-2804",
        "The Definition",
        "The most Blessed Virgin Mary, in the first instance of her conception, by a singular "
        "grace and privilege granted by Almighty God, in view of the merits of Jesus Christ, "
        "the Savior of the human race, was preserved free from all stain of original sin.",
    ),
    (
        "10302",
        "Aeterni Patris",
        "Encyclical on the Restoration of Christian Philosophy",
        "Pope Leo XIII",
        1879,
        "ASS 12 (1879) 97-115",
        "Introduction",
        "The only-begotten Son of the Eternal Father, who came on earth to bring salvation and "
        "the light of divine wisdom to men, conferred a great and wonderful blessing on the "
        "world when He commanded the apostles to teach all nations. Among the Scholastic "
        "Doctors, Thomas Aquinas towers above all as their chief and master.",
    ),
    (
        "10303",
        "Rerum Novarum",
        "Encyclical on Capital and Labor",
        "Pope Leo XIII",
        1891,
        "ASS 23 (1890-91) 641-670",
        "The Condition of the Working Classes",
        "That the spirit of revolutionary change, which has long been disturbing the nations "
        "of the world, should have passed beyond the sphere of politics and made its "
        "influence felt in the cognate sphere of practical economics is not surprising. "
        "Workers are not to be treated as bondsmen; a just wage is owed to the labourer.",
    ),
    (
        "10304",
        "Pascendi Dominici Gregis",
        "Encyclical on the Doctrines of the Modernists",
        "Pope Pius X",
        1907,
        "ASS 40 (1907) 593-650",
        "Introduction",
        "One of the primary obligations assigned by Christ to the office divinely committed to "
        "Us of feeding the Lord's flock is that of guarding with the greatest vigilance the "
        "deposit of the faith delivered to the saints.",
    ),
    (
        "10305",
        "Quadragesimo Anno",
        "Encyclical on Reconstruction of the Social Order",
        "Pope Pius XI",
        1931,
        "AAS 23 (1931) 177-228",
        "The Principle of Subsidiarity",
        "Just as it is gravely wrong to take from individuals what they can accomplish by their "
        "own initiative and industry and give it to the community, so also it is an injustice "
        "and at the same time a grave evil and disturbance of right order to assign to a "
        "greater and higher association what lesser and subordinate organizations can do.",
    ),
    (
        "10306",
        "Divino Afflante Spiritu",
        "Encyclical on Promoting Biblical Studies",
        "Pope Pius XII",
        1943,
        "AAS 35 (1943) 297-325",
        "Introduction",
        "Inspired by the Divine Spirit, the Sacred Writers composed those books, which God, in "
        "His paternal charity towards the human race, deigned to bestow on them. The "
        "interpreter must endeavour to determine the literal sense of the words of Scripture.",
    ),
    (
        "10307",
        "Humani Generis",
        "Encyclical concerning some false opinions threatening to undermine Catholic doctrine",
        "Pope Pius XII",
        1950,
        "AAS 42 (1950) 561-578",
        "Introduction",
        "Disagreement and error among men on moral and religious matters have always been a "
        "cause of profound sorrow to all good men, but above all to the true and loyal sons of "
        "the Church, especially today, when we see the principles of Christian culture being "
        "attacked on all sides.",
    ),
    (
        "10308",
        "Munificentissimus Deus",
        "Apostolic Constitution defining the Dogma of the Assumption",
        "Pope Pius XII",
        1950,
        "AAS 42 (1950) 753-773",
        "The Definition",
        "We pronounce, declare, and define it to be a divinely revealed dogma: that the "
        "Immaculate Mother of God, the ever Virgin Mary, having completed the course of her "
        "earthly life, was assumed body and soul into heavenly glory.",
    ),
    (
        "10309",
        "Mater et Magistra",
        "Encyclical on Christianity and Social Progress",
        "Pope John XXIII",
        1961,
        "AAS 53 (1961) 401-464",
        "Introduction",
        "Mother and Teacher of all nations, such is the Catholic Church in the mind of her "
        "Founder, Jesus Christ; to hold the world in an embrace of love, that men, in every "
        "age, might find in her their own completeness in a higher order of living.",
    ),
    (
        "10310",
        "Pacem in Terris",
        "Encyclical on Establishing Universal Peace in Truth, Justice, Charity, and Liberty",
        "Pope John XXIII",
        1963,
        "AAS 55 (1963) 257-304",
        "Introduction",
        "Peace on Earth, which man throughout the ages has so longed for and sought after, "
        "can never be established, never guaranteed, except by the diligent observance of the "
        "divinely established order. Every human being is a person, endowed with intelligence "
        "and free will, and has rights and duties.",
    ),
    (
        "10311",
        "Populorum Progressio",
        "Encyclical on the Development of Peoples",
        "Pope Paul VI",
        1967,
        "AAS 59 (1967) 257-299",
        "Introduction",
        "The progressive development of peoples is an object of deep interest and concern to "
        "the Church. Development is the new name for peace.",
    ),
    (
        "10312",
        "Humanae Vitae",
        "Encyclical on the Regulation of Birth",
        "Pope Paul VI",
        1968,
        "AAS 60 (1968) 481-503",
        "Introduction",
        "The transmission of human life is a most serious role in which married people "
        "collaborate freely and responsibly with God the Creator. Each and every marriage act "
        "must remain open to the transmission of life.",
    ),
    (
        "10313",
        "Evangelii Nuntiandi",
        "Apostolic Exhortation on Evangelization in the Modern World",
        "Pope Paul VI",
        1975,
        "AAS 68 (1976) 5-76",
        "Introduction",
        "Evangelizing is in fact the grace and vocation proper to the Church, her deepest "
        "identity. She exists in order to evangelize. Modern man listens more willingly to "
        "witnesses than to teachers.",
    ),
    (
        "10314",
        "Redemptor Hominis",
        "Encyclical at the Beginning of His Papal Ministry",
        "Pope John Paul II",
        1979,
        "AAS 71 (1979) 257-324",
        "Inheritance",
        "The Redeemer of man, Jesus Christ, is the centre of the universe and of history. Man "
        "cannot live without love; his life is senseless if love is not revealed to him.",
    ),
    (
        "10315",
        "Laborem Exercens",
        "Encyclical on Human Work",
        "Pope John Paul II",
        1981,
        "AAS 73 (1981) 577-647",
        "Introduction",
        "Through work man must earn his daily bread and contribute to the continual advance of "
        "science and technology and, above all, to elevating unceasingly the cultural and "
        "moral level of the society within which he lives in community with those who belong "
        "to the same family.",
    ),
    (
        "10316",
        "Familiaris Consortio",
        "Apostolic Exhortation on the Role of the Christian Family in the Modern World",
        "Pope John Paul II",
        1981,
        "AAS 74 (1982) 81-191",
        "Introduction",
        "The family in the modern world, as much as and perhaps more than any other "
        "institution, has been beset by the many profound and rapid changes that have affected "
        "society and culture. The future of humanity passes by way of the family.",
    ),
    (
        "10317",
        "Centesimus Annus",
        "Encyclical on the Hundredth Anniversary of Rerum Novarum",
        "Pope John Paul II",
        1991,
        "AAS 83 (1991) 793-867",
        "Introduction",
        "The centenary of the promulgation of the Encyclical which begins with the words "
        "Rerum novarum, by my predecessor of venerable memory Pope Leo XIII, is an occasion of "
        "great importance for the present history of the Church.",
    ),
    (
        "10318",
        "Veritatis Splendor",
        "Encyclical regarding certain fundamental questions of the Church's moral teaching",
        "Pope John Paul II",
        1993,
        "AAS 85 (1993) 1133-1228",
        "Introduction",
        "The splendour of truth shines forth in all the works of the Creator and, in a special "
        "way, in man, created in the image and likeness of God. Truth enlightens man's "
        "intelligence and shapes his freedom.",
    ),
    (
        "10319",
        "Evangelium Vitae",
        "Encyclical on the Value and Inviolability of Human Life",
        "Pope John Paul II",
        1995,
        "AAS 87 (1995) 401-522",
        "Introduction",
        "The Gospel of life is at the heart of Jesus' message. Lovingly received day after day "
        "by the Church, it is to be preached with dauntless fidelity as good news to the "
        "people of every age and culture.",
    ),
    (
        "10320",
        "Fides et Ratio",
        "Encyclical on the Relationship between Faith and Reason",
        "Pope John Paul II",
        1998,
        "AAS 91 (1999) 5-88",
        "Introduction",
        "Faith and reason are like two wings on which the human spirit rises to the "
        "contemplation of truth; and God has placed in the human heart a desire to know the "
        "truth, in a word, to know himself.",
    ),
    (
        "10321",
        "Ecclesia de Eucharistia",
        "Encyclical on the Eucharist in its Relationship to the Church",
        "Pope John Paul II",
        2003,
        "AAS 95 (2003) 433-475",
        "Introduction",
        "The Church draws her life from the Eucharist. This truth does not simply express a "
        "daily experience of faith, but recapitulates the heart of the mystery of the Church.",
    ),
    (
        "10322",
        "Deus Caritas Est",
        "Encyclical on Christian Love",
        "Pope Benedict XVI",
        2005,
        "AAS 98 (2006) 217-252",
        "Introduction",
        "God is love, and he who abides in love abides in God, and God abides in him. Being "
        "Christian is not the result of an ethical choice or a lofty idea, but the encounter "
        "with an event, a person, which gives life a new horizon and a decisive direction.",
    ),
    (
        "10323",
        "Spe Salvi",
        "Encyclical on Christian Hope",
        "Pope Benedict XVI",
        2007,
        "AAS 99 (2007) 985-1027",
        "Faith is Hope",
        "In hope we were saved, says Saint Paul to the Romans, and likewise to us. Redemption "
        "is offered to us in the sense that we have been given hope, trustworthy hope, by "
        "virtue of which we can face our present.",
    ),
    (
        "10324",
        "Caritas in Veritate",
        "Encyclical on Integral Human Development in Charity and Truth",
        "Pope Benedict XVI",
        2009,
        "AAS 101 (2009) 641-709",
        "Introduction",
        "Charity in truth, to which Jesus Christ bore witness by his earthly life and "
        "especially by his death and resurrection, is the principal driving force behind the "
        "authentic development of every person and of all humanity.",
    ),
    (
        "10325",
        "Verbum Domini",
        "Post-Synodal Apostolic Exhortation on the Word of God in the Life and Mission of the "
        "Church",
        "Pope Benedict XVI",
        2010,
        "AAS 102 (2010) 681-787",
        "Introduction",
        "The word of the Lord abides for ever. This word is the Gospel which was preached to "
        "you. With this assertion from the First Letter of Saint Peter, the Synod wished to "
        "share the joy of encountering the word of God.",
    ),
    (
        "10326",
        "Lumen Fidei",
        "Encyclical on Faith",
        "Pope Francis",
        2013,
        "AAS 105 (2013) 555-596",
        "Introduction",
        "The light of Faith: this is how the Church's tradition speaks of the great gift "
        "brought by Jesus. Faith is a light capable of illuminating every aspect of human "
        "existence.",
    ),
    (
        "10327",
        "Evangelii Gaudium",
        "Apostolic Exhortation on the Proclamation of the Gospel in Today's World",
        "Pope Francis",
        2013,
        "AAS 105 (2013) 1019-1137",
        "Introduction",
        "The joy of the gospel fills the hearts and lives of all who encounter Jesus. Those who "
        "accept his offer of salvation are set free from sin, sorrow, inner emptiness and "
        "loneliness.",
    ),
    (
        "10328",
        "Laudato Si'",
        "Encyclical on Care for our Common Home",
        "Pope Francis",
        2015,
        "AAS 107 (2015) 847-945",
        "Our Common Home",
        "Saint Francis of Assisi reminds us that our common home is like a sister with whom we "
        "share our life and a beautiful mother who opens her arms to embrace us. The climate "
        "is a common good, belonging to all and meant for all; everything in creation is "
        "interconnected.",
    ),
    (
        "10329",
        "Amoris Laetitia",
        "Post-Synodal Apostolic Exhortation on Love in the Family",
        "Pope Francis",
        2016,
        "AAS 108 (2016) 311-446",
        "Introduction",
        "The joy of love experienced by families is also the joy of the Church. The welfare "
        "of the family is decisive for the future of the world and that of the Church.",
    ),
    (
        "10330",
        "Gaudete et Exsultate",
        "Apostolic Exhortation on the Call to Holiness in Today's World",
        "Pope Francis",
        2018,
        "AAS 110 (2018) 1111-1161",
        "The Call to Holiness",
        "Rejoice and be glad, Jesus tells those persecuted or humiliated for his sake. The Lord "
        "asks everything of us, and in return he offers us true life, the happiness for which "
        "we were created. He wants us to be saints.",
    ),
    (
        "10331",
        "Christus Vivit",
        "Post-Synodal Apostolic Exhortation to Young People and to the Entire People of God",
        "Pope Francis",
        2019,
        "CV",
        "Introduction",
        "Christ is alive! He is our hope, and in a wonderful way he brings youth to our world, "
        "and everything he touches becomes young, new, full of life.",
    ),
    (
        "10332",
        "Fratelli Tutti",
        "Encyclical on Fraternity and Social Friendship",
        "Pope Francis",
        2020,
        "AAS 112 (2020) 969-1074",
        "Introduction",
        "With these words, Saint Francis of Assisi addressed his brothers and sisters and "
        "proposed to them a way of life marked by the flavour of the Gospel. He called for a "
        "love that transcends the barriers of geography and distance.",
    ),
    (
        "10333",
        "Dilexit Nos",
        "Encyclical on the Human and Divine Love of the Heart of Jesus Christ",
        "Pope Francis",
        2024,
        "DN",
        "The Importance of the Heart",
        "He loved us, Saint Paul says of Christ, in order to make us realize that nothing can "
        "ever separate us from that love. The heart of Christ is the centre of his love for us.",
    ),
)
