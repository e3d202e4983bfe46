"""DataCollatorWithPadding: every key, pad_to_multiple_of, labels of every kind, clear errors."""

from __future__ import annotations

import pickle

import pytest
import torch

from nlp._common import DataError
from nlp.tokenizer.collate import DataCollatorWithPadding


def feat(ids, **extra):
    return {"input_ids": list(ids), **extra}


def test_pads_every_token_key_to_longest():
    c = DataCollatorWithPadding(pad_token_id=7)
    batch = c([
        feat([1, 2, 3], token_type_ids=[0, 0, 1], task_type_ids=[2, 2, 2], position_ids=[0, 1, 2],
             attention_mask=[1, 1, 1]),
        feat([4], token_type_ids=[1], task_type_ids=[3], position_ids=[0], attention_mask=[1]),
    ])
    assert batch["input_ids"].tolist() == [[1, 2, 3], [4, 7, 7]]
    assert batch["token_type_ids"].tolist() == [[0, 0, 1], [1, 0, 0]]
    assert batch["task_type_ids"].tolist() == [[2, 2, 2], [3, 0, 0]]
    assert batch["position_ids"].tolist() == [[0, 1, 2], [0, 0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert all(t.dtype == torch.long for t in batch.values())
    assert set(batch) == {"input_ids", "token_type_ids", "task_type_ids", "position_ids", "attention_mask"}


def test_attention_mask_created_when_absent():
    batch = DataCollatorWithPadding()([feat([5, 6]), feat([5, 6, 7, 8])])
    assert batch["attention_mask"].tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]


@pytest.mark.parametrize("multiple,expected", [(None, 5), (1, 5), (4, 8), (8, 8), (5, 5)])
def test_pad_to_multiple_of(multiple, expected):
    batch = DataCollatorWithPadding(pad_to_multiple_of=multiple)([feat(range(1, 6)), feat([1])])
    assert batch["input_ids"].shape == (2, expected)
    assert batch["attention_mask"].sum().item() == 6


def test_left_padding_and_fixed_max_length():
    batch = DataCollatorWithPadding(padding_side="left", pad_token_id=9)([feat([1, 2]), feat([3])])
    assert batch["input_ids"].tolist() == [[1, 2], [9, 3]]
    assert batch["attention_mask"].tolist() == [[1, 1], [0, 1]]
    fixed = DataCollatorWithPadding(max_length=6)([feat([1, 2]), feat([3])])
    assert fixed["input_ids"].shape == (2, 6)
    with pytest.raises(DataError, match=r"feature 1 has 7 input_ids, more than max_length=6"):
        DataCollatorWithPadding(max_length=6)([feat([1]), feat(range(7))])


def test_token_labels_padded_with_label_pad_id():
    batch = DataCollatorWithPadding(label_pad_id=-1)([feat([1, 2, 3], labels=[-100, 4, -100]), feat([1], labels=[2])])
    assert batch["labels"].tolist() == [[-100, 4, -100], [2, -1, -1]]
    assert DataCollatorWithPadding()([feat([1, 2], labels=[1, 1]), feat([1], labels=[0])])["labels"].tolist() == [
        [1, 1], [0, -100]]


def test_sequence_labels_classification_and_regression():
    cls = DataCollatorWithPadding()([feat([1, 2], labels=1), feat([1], labels=0)])["labels"]
    assert cls.dtype == torch.long and cls.tolist() == [1, 0]
    reg = DataCollatorWithPadding()([feat([1, 2], labels=0.5), feat([1], labels=2)])["labels"]
    assert reg.dtype == torch.float32 and reg.tolist() == [0.5, 2.0]


def test_multi_label_lists():
    batch = DataCollatorWithPadding()([feat([1, 2, 3], labels=[1, 0]), feat([1], labels=[0, 1])])
    assert batch["labels"].dtype == torch.float32 and batch["labels"].tolist() == [[1.0, 0.0], [0.0, 1.0]]
    floats = DataCollatorWithPadding()([feat([1, 2], labels=[1.0, 0.0]), feat([1, 3], labels=[0.0, 1.0])])
    assert floats["labels"].shape == (2, 2) and floats["labels"].dtype == torch.float32
    # ambiguous (int lists as long as every input_ids) reads as token labels unless told
    amb = [feat([1, 2], labels=[1, 0]), feat([3, 4], labels=[0, 1])]
    assert DataCollatorWithPadding()(amb)["labels"].dtype == torch.long
    assert DataCollatorWithPadding(label_kind="sequence")(amb)["labels"].dtype == torch.float32


def test_qa_positions_stacked():
    batch = DataCollatorWithPadding()([feat([1, 2, 3], start_positions=1, end_positions=2),
                                       feat([1], start_positions=0, end_positions=0)])
    assert batch["start_positions"].tolist() == [1, 0] and batch["end_positions"].tolist() == [2, 0]
    assert batch["start_positions"].dtype == torch.long


def test_tensor_and_tuple_inputs_accepted():
    batch = DataCollatorWithPadding()([{"input_ids": torch.tensor([1, 2])}, {"input_ids": (3,)}])
    assert batch["input_ids"].tolist() == [[1, 2], [3, 0]]


def test_drop_and_keep_keys():
    feats = [feat([1, 2], offset_mapping=[(0, 0), (0, 1)], example_id="a"),
             feat([1], offset_mapping=[(0, 0)], example_id="b")]
    assert set(DataCollatorWithPadding()(feats)) == {"input_ids", "attention_mask"}
    kept = DataCollatorWithPadding(keep_keys=("offset_mapping", "example_id"))(feats)
    assert kept["example_id"] == ["a", "b"] and kept["offset_mapping"] == [[(0, 0), (0, 1)], [(0, 0)]]
    assert set(DataCollatorWithPadding(drop_keys=("my_col",))([feat([1], my_col=3)])) == {"input_ids", "attention_mask"}


def test_unknown_key_error_suggests_the_right_name():
    with pytest.raises(DataError, match=r"unknown feature key 'label'\. Did you mean 'labels'\?.*keep_keys"):
        DataCollatorWithPadding()([feat([1], label=1)])


def test_errors_name_feature_and_key():
    c = DataCollatorWithPadding()
    with pytest.raises(DataError, match=r"feature 1 'token_type_ids' has 1 items but 'input_ids' has 2"):
        c([feat([1], token_type_ids=[0]), feat([1, 2], token_type_ids=[0])])
    with pytest.raises(DataError, match=r"feature 1 lacks \['labels'\]"):
        c([feat([1], labels=1), feat([1])])
    with pytest.raises(DataError, match=r"feature 1 has no 'input_ids'"):
        c([feat([1]), {"labels": 1}])
    with pytest.raises(DataError, match=r"feature 1 'labels' has 3 items but 'input_ids' has 2"):
        c([feat([1], labels=[1]), feat([1, 2], labels=[1, 2, 3])])
    with pytest.raises(DataError, match=r"multi-label 'labels' must all have the same size"):
        c([feat([1], labels=[0.5]), feat([1, 2], labels=[1.0, 2.0, 3.0])])
    with pytest.raises(DataError, match=r"feature 1 'labels' is str"):
        c([feat([1], labels=1), feat([1], labels="pos")])
    with pytest.raises(DataError, match=r"feature 0 'start_positions' should be one int"):
        c([feat([1], start_positions=[1], end_positions=1)])
    with pytest.raises(DataError, match=r"could not make .* 'input_ids'"):
        c([feat(["a"])])
    with pytest.raises(DataError, match="non-empty list"):
        c([])
    with pytest.raises(DataError, match="feature 0 is a str"):
        c(["abc"])


def test_bad_settings_rejected():
    with pytest.raises(DataError, match="padding_side"):
        DataCollatorWithPadding(padding_side="middle")
    with pytest.raises(DataError, match="pad_to_multiple_of"):
        DataCollatorWithPadding(pad_to_multiple_of=0)
    with pytest.raises(DataError, match="label_kind"):
        DataCollatorWithPadding(label_kind="tokens")


def test_picklable_and_works_in_dataloader_workers():
    c = DataCollatorWithPadding(pad_token_id=3, pad_to_multiple_of=8)
    assert pickle.loads(pickle.dumps(c)) == c
    data = [feat(range(1, n + 1), labels=n % 2) for n in range(1, 21)]
    loader = torch.utils.data.DataLoader(data, batch_size=4, collate_fn=c, num_workers=2)
    batches = list(loader)
    assert len(batches) == 5
    assert sum(int(b["attention_mask"].sum()) for b in batches) == sum(range(1, 21))
    assert all(b["input_ids"].shape[1] % 8 == 0 for b in batches)
