"""The llama.cpp backend, over llama-cpp-python's low-level C API.

We drive ``llama_model_load_from_file`` / ``llama_init_from_model`` / ``llama_decode``
directly instead of the high-level ``Llama`` class, for three reasons:

* a load can be aborted: the model params' ``progress_callback`` returns ``False`` once the
  awaiting task is cancelled (``Llama`` offers no way to pass it);
* no ``n_batch x n_vocab`` float32 ``scores`` array (0.5 GB at ``n_batch=512`` for Gemma's
  262k vocabulary): we ask llama.cpp for one output row per batch (``n_outputs_max=1``);
* prefix state is saved and restored per sequence (``llama_state_seq_*``), which copies only
  the KV cells, not logits or scores.

Choice of ``n_batch``: 128. Measured on this machine (2 cores, no GPU, other jobs running,
so best of 4 rounds) with Gemma 3 270M Q8_0, n_ctx 2048, a 394-token prompt; TTFT is the
first generation right after a fresh load (the first eval touches every weight page and the
compute buffers); prefill is the best of 3 warm runs; RSS is the delta across load +
generation::

    n_batch   TTFT after load   prefill tok/s   RSS MiB
         16            0.97 s             420     361.1
         32            0.77 s             510     361.4
         64            0.70 s             593     363.2
        128            0.53 s             707     365.8
        512            0.60 s             691     377.7

Past 128 prefill gets no faster on 2 cores while the compute buffer keeps growing (~35 KB
per batch token). With one output row per batch the 262k vocabulary costs 1 MiB whatever
``n_batch`` is; through the ``Llama`` class ``n_batch=512`` would add a 512 MiB scores array.
A prefill chunk of 128 tokens takes ~0.2 s, which bounds cancellation latency during prefill.

Modules: ``backend`` (the ``ModelBackend``: load, warm, tokenizer helpers), ``loading``
(file checks, footprint, model + context, identity), ``model`` (the ``LoadedModel``),
``decode`` (one generation's loop), ``kv_state`` (prefix save/restore), ``vocab``
(tokenizer, token counters), ``stops`` (stop sequences), ``runtime`` (process-wide setup).
"""

from swapos.backends.llama.backend import LlamaBackend as LlamaBackend
from swapos.backends.llama.loading import load_model as load_model
from swapos.backends.llama.model import LlamaModel as LlamaModel
