"""XGBoost's legacy binary model format (model_type "xgboost", file
xgboost.model), written from a booster's JSON: XGBoost 3.1 and later no
longer write it, and FIL repositories still hold it. The layout is the one
XGBoost 1.x wrote and Treelite's legacy loader reads: the learner's
parameters (136 bytes), the objective's and booster's names, the booster's
parameters (160 bytes), each tree (its parameters, nodes and node
statistics), then each tree's class."""

from __future__ import annotations

import json
import struct
from typing import Any


def _name(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def legacy_binary(booster: Any) -> bytes:
    """The booster in the legacy binary format (scalar leaves). The format
    holds one base score: a multi-class model's per-class base scores
    (margins, as softmax objectives keep them) become the first class's,
    the others' differences added to the leaves of their class's first tree."""
    learner = json.loads(booster.save_raw("json"))["learner"]
    param = learner["learner_model_param"]
    model = learner["gradient_booster"]["model"]
    num_feature, num_class = int(param["num_feature"]), int(param["num_class"])
    trees = model["trees"]
    bases = [float(v) for v in param["base_score"].strip("[]").split(",")]
    shifted: set[int] = set()
    for tree, group in zip(trees, model["tree_info"]):
        if len(bases) > 1 and group not in shifted and bases[group] != bases[0]:
            shifted.add(group)
            for i, left in enumerate(tree["left_children"]):
                if left == -1:
                    tree["split_conditions"][i] += bases[group] - bases[0]
    out = [struct.pack("<fIiiiIII26i", bases[0], num_feature, num_class,
                       0, 0, 1, 7, 1, *([0] * 26)),
           _name(learner["objective"]["name"]), _name("gbtree"),
           struct.pack("<iiiiqii32i", len(trees), 1, num_feature, 0, 0, max(num_class, 1), 0,
                       *([0] * 32))]
    for tree in trees:
        nodes = len(tree["left_children"])
        out.append(struct.pack("<6i31i", 1, nodes, 0, 0, num_feature, 0, *([0] * 31)))
        for i in range(nodes):
            parent = tree["parents"][i]
            if parent == 2147483647:
                parent = -1
            elif tree["left_children"][parent] == i:
                parent |= 1 << 31
            index = tree["split_indices"][i] | (int(tree["default_left"][i]) << 31)
            out.append(struct.pack("<iiiIf", parent - (1 << 32) if parent >= 1 << 31 else parent,
                                   tree["left_children"][i], tree["right_children"][i], index,
                                   tree["split_conditions"][i]))
        for i in range(nodes):
            out.append(struct.pack("<fffi", tree["loss_changes"][i], tree["sum_hessian"][i],
                                   tree["base_weights"][i], 0))
    out.append(struct.pack(f"<{len(trees)}i", *model["tree_info"]))
    return b"".join(out)
