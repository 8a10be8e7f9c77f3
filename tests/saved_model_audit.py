"""Lists every op of a SavedModel and checks them against what tensorflow_model_server runs.

Stock `tensorflow_model_server` links TensorFlow's core ops and tensorflow-text's op library
and runs with XLA compilation off. The allowed op names come from the op registries of a
fresh process (`REGISTERED_OPS_FUNCTION`): those registered by `import tensorflow` and those added
by `import tensorflow_text`.
"""

import os

from tensorflow.core.protobuf import saved_model_pb2

# Source of `registered_ops()`, the names of every op in the process's registry, for a
# subprocess script to call after `import tensorflow` and again after `import tensorflow_text`.
REGISTERED_OPS_FUNCTION = """
def registered_ops():
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session as c_api

    buffer = c_api.TF_GetAllOpList()
    try:
        op_list = op_def_pb2.OpList.FromString(c_api.TF_GetBuffer(buffer))
    finally:
        c_api.TF_DeleteBuffer(buffer)
    return {op.name for op in op_list.op}
"""
# Variable writes (optimizer updates) and random ops (dropout) have no place in a
# serving function: their presence would mean training code was traced.
TRAINING_OP_PREFIXES = ("Assign", "ResourceApply", "ResourceSparseApply", "ResourceScatter")


def read_saved_model(path):
    """The `SavedModel` proto of the directory `path`."""
    with open(os.path.join(path, "saved_model.pb"), "rb") as file:
        return saved_model_pb2.SavedModel.FromString(file.read())


def _called_functions(node_def):
    """Names of the functions a node calls through its attributes (f, body, branches...)."""
    names = []
    for value in node_def.attr.values():
        if value.HasField("func"):
            names.append(value.func.name)
        if value.HasField("list"):
            names.extend(function.name for function in value.list.func)
    return names


def audit_saved_model(path, allowed_ops):
    """Every op of the SavedModel at `path`, and every problem found.

    Looks at each meta graph's nodes and at every function of its function
    library, and walks the functions called from each serving signature
    (recursively, through call, loop and branch attributes).

    Args:
        path: the SavedModel directory.
        allowed_ops: set of op names that may appear.

    Returns:
        `(ops, problems)`: the set of op names used anywhere, and a list of
        str, one per problem: an op not in `allowed_ops`, an XLA op
        (`XlaCallModule`, any `Xla*` op: they only run compiled), a
        must-compile function or node (`_XlaMustCompile`), a variable-writing
        or random op in a signature's functions, a call to a missing function.
    """
    problems, ops = [], set()
    for meta_graph in read_saved_model(path).meta_graphs:
        graph_def = meta_graph.graph_def
        library = {function.signature.name: function for function in graph_def.library.function}
        located = [("graph", node) for node in graph_def.node] + [
            (name, node) for name, function in library.items() for node in function.node_def
        ]
        for name, function in library.items():
            if function.attr["_XlaMustCompile"].b:
                problems.append(f"function {name} is must-compile (_XlaMustCompile)")
        for where, node in located:
            ops.add(node.op)
            if node.op.startswith(("Xla", "_Xla")):
                problems.append(f"XLA op {node.op} in {where}")
            elif node.op not in allowed_ops and node.op not in library:
                problems.append(f"op {node.op} in {where} is not in TensorFlow or tensorflow-text")
            if node.attr["_XlaMustCompile"].b:
                problems.append(f"node {node.name} in {where} is must-compile (_XlaMustCompile)")
            for called in _called_functions(node):
                if called not in library:
                    problems.append(f"{where} calls the missing function {called}")
        # The functions each signature runs, recursively.
        nodes = {node.name: node for node in graph_def.node}
        pending = [
            called
            for signature_name, signature in meta_graph.signature_def.items()
            if signature_name != "__saved_model_init_op"
            for tensor in signature.outputs.values()
            for called in _called_functions(nodes[tensor.name.split(":")[0]])
        ]
        reached = set()
        while pending:
            name = pending.pop()
            if name in reached or name not in library:
                continue
            reached.add(name)
            for node in library[name].node_def:
                pending.extend(_called_functions(node))
                if node.op.startswith(TRAINING_OP_PREFIXES) or "Random" in node.op:
                    problems.append(f"training-time op {node.op} in serving function {name}")
        if not reached:
            problems.append("no function reached from the serving signatures")
    return ops, problems
