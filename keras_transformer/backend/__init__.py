"""The one place that looks at the Keras backend and the device, and picks each fast form.

The rest of the package asks this package by name (`backend.is_tensorflow()`,
`backend.fast_forms()`, `backend.compile_search(...)`); its modules, by concern:

- `device.py`: the backend's name, whether it computes on a GPU or TPU, checks that
  need one backend;
- `forms.py`: the fast forms (a faster form of the same function on some backend), which
  apply where, and turning them off;
- `kernels.py`: the ops with a fast form (top-k of a wide row, embedding gathers, uint32
  wrapping);
- `training_setup.py`: building before the trace, the seed's device, the replica context,
  multi-process runs;
- `decoding.py`: the decoding cache, loop and compilation, workers and batch size;
- `persistent_cache.py`: JAX's persistent compilation cache;
- `frozen_heap.py`: Keras' variable removals without a walk over the whole heap.
"""

from keras_transformer.backend.decoding import (
    DECODING_BATCH_TOKENS,
    PAIRED_STEPS_MIN_BYTES,
    compile_search,
    decoding_batch_tokens,
    decoding_loop,
    decoding_workers,
    growing_cache,
    paired_beam_steps,
    shrinking_batch,
    update_cache,
)
from keras_transformer.backend.device import (
    is_jax,
    is_tensorflow,
    name,
    on_accelerator,
    require_tensorflow,
    require_torch,
)
from keras_transformer.backend.forms import (
    DECODING_FORMS,
    ENVIRONMENT_VARIABLE,
    FORMS,
    FastForms,
    applicable_forms,
    disabled_forms,
    fast_forms,
    fast_forms_disabled,
)
from keras_transformer.backend.frozen_heap import frozen_heap
from keras_transformer.backend.kernels import (
    gather_rows,
    top_k,
    wrap_uint32,
)
from keras_transformer.backend.persistent_cache import (
    compilation_cache,
)
from keras_transformer.backend.training_setup import (
    build_before_tracing,
    host_seed_scope,
    in_one_process,
    replica_context,
)

__all__ = [
    "DECODING_BATCH_TOKENS",
    "DECODING_FORMS",
    "ENVIRONMENT_VARIABLE",
    "FORMS",
    "PAIRED_STEPS_MIN_BYTES",
    "FastForms",
    "applicable_forms",
    "build_before_tracing",
    "compilation_cache",
    "compile_search",
    "decoding_batch_tokens",
    "decoding_loop",
    "decoding_workers",
    "disabled_forms",
    "fast_forms",
    "fast_forms_disabled",
    "frozen_heap",
    "gather_rows",
    "growing_cache",
    "host_seed_scope",
    "in_one_process",
    "is_jax",
    "is_tensorflow",
    "name",
    "on_accelerator",
    "paired_beam_steps",
    "replica_context",
    "require_tensorflow",
    "require_torch",
    "shrinking_batch",
    "top_k",
    "update_cache",
    "wrap_uint32",
]
