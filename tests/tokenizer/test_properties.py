"""Hypothesis over arbitrary Unicode, for both tokenizers: offsets and decoding."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)
CJK = st.text(st.sampled_from(list("这家餐厅的服务非常好我爱北京天安门 helo,。")), max_size=40)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=TEXT, b=TEXT)
def test_offsets_in_bounds_and_non_decreasing(tok, a, b):
    enc = tok(a, b, return_offsets_mapping=True)
    last = {0: 0, 1: 0}
    for (s, e), sid in zip(enc["offset_mapping"], enc.sequence_ids()):
        if sid is None:
            assert (s, e) == (0, 0)
            continue
        text = a if sid == 0 else b
        assert 0 <= s <= e <= len(text)
        assert s >= last[sid]
        last[sid] = s


def _squash(s: str) -> str:
    return "".join(s.split())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=CJK)
def test_decode_gives_normalised_text(tok, text):
    ids = tok(text)["input_ids"]
    assert tok.unk_token_id not in ids
    decoded = tok.decode(ids, skip_special_tokens=True)
    assert _squash(decoded) == _squash(text.lower())
