"""Generated prose in kana (with a few kanji), for works in a script that has no pinyin (tests and the piracy
eval). Not a real text: nouns with particles, adverbs and verbs drawn at random into sentences, so two texts
drawn with different seeds share only short chance runs."""

from __future__ import annotations

import random

__all__ = ["kana_prose"]

_NOUNS = (
    "わたし",
    "あなた",
    "ともだち",
    "みち",
    "やま",
    "うみ",
    "かぜ",
    "あめ",
    "ひかり",
    "こえ",
    "まど",
    "てがみ",
    "ほん",
    "コーヒー",
    "ノート",
    "ラジオ",
    "バス",
    "ホテル",
    "ドア",
    "ピアノ",
    "カメラ",
    "タクシー",
    "えき",
    "まちかど",
    "にわ",
    "そら",
    "ゆき",
    "はな",
    "とり",
    "ねこ",
    "いぬ",
    "こどもたち",
    "おかあさん",
    "せんせい",
    "きっぷ",
    "かばん",
    "つくえ",
    "いす",
    "かわ",
    "もり",
    "しま",
    "ふね",
    "くるま",
    "みせ",
    "へや",
    "だいどころ",
    "テーブル",
    "ギター",
    "ケーキ",
    "スープ",
    "パン",
    "シャツ",
    "ボタン",
    "ランプ",
    "カーテン",
    "ベンチ",
)
_PARTICLES = ("は", "が", "を", "に", "で", "と", "の", "へ", "から", "まで", "も")
_ADVERBS = (
    "きのう",
    "あした",
    "ゆっくり",
    "しずかに",
    "はやく",
    "すこし",
    "もういちど",
    "なぜか",
    "きっと",
    "まるで",
    "そして",
    "けれども",
    "だから",
    "それから",
    "いつも",
    "ときどき",
    "ずっと",
    "まだ",
    "もう",
    "やっと",
)
_VERBS = (
    "よみました",
    "あるきました",
    "はしりました",
    "みました",
    "ききました",
    "わらいました",
    "ないていた",
    "まっていた",
    "かえりました",
    "ねむっていた",
    "さがしていた",
    "つくりました",
    "かいました",
    "わすれた",
    "おもいだした",
    "しらなかった",
    "はじまった",
    "おわった",
    "ひらいた",
    "しめた",
    "よんでいる",
    "うたった",
)


def kana_prose(rng: random.Random, length: int) -> str:
    """About ``length`` characters of sentences (each ends with 。)."""
    sentences: list[str] = []
    total = 0
    while total < length:
        words = [rng.choice(_ADVERBS)] if rng.random() < 0.5 else []
        words += [rng.choice(_NOUNS) + rng.choice(_PARTICLES) for _ in range(rng.randint(2, 5))]
        words.append(rng.choice(_VERBS))
        sentence = "".join(words) + "。"
        sentences.append(sentence)
        total += len(sentence)
    return "".join(sentences)
