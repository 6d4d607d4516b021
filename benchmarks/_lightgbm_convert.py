"""Turn a trained LightGBM booster into an msclassify `Booster`.

So LightGBM's own CEGB models are priced by exactly the same prediction-cost
code as ours. Only numerical ``<=`` splits are supported (no categorical).
"""

import numpy as np

from msclassify.cegb import Booster


def booster_from_lightgbm(lgb_booster, feature_costs=None):
    model = lgb_booster.dump_model()
    trees = [_tree(info["tree_structure"]) for info in model["tree_info"]]
    n_features = model["max_feature_idx"] + 1
    return Booster(trees, [0.0], n_features, "binary", 0.0, feature_costs)


def _tree(root):
    nodes = []

    def visit(node):
        index = len(nodes)
        nodes.append(None)
        if "leaf_value" in node:
            nodes[index] = (-1, np.nan, False, -1, -1, node["leaf_value"], node.get("leaf_count", 0))
            return index
        if node["decision_type"] != "<=":
            raise ValueError(f"unsupported LightGBM split {node['decision_type']!r}")
        left = visit(node["left_child"])
        right = visit(node["right_child"])
        nodes[index] = (node["split_feature"], float(node["threshold"]), node["default_left"],
                        left, right, 0.0, node.get("internal_count", 0))
        return index

    visit(root)
    columns = list(zip(*nodes))
    n = len(nodes)
    return {"feature": np.array(columns[0], np.int32), "threshold": np.array(columns[1], float),
            "default_left": np.array(columns[2], bool), "left": np.array(columns[3], np.int32),
            "right": np.array(columns[4], np.int32), "value": np.array(columns[5], float),
            "count": np.array(columns[6], float), "share": np.ones(n), "gain": np.zeros(n)}
