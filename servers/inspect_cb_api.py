"""Print the continuous-batching API of the installed transformers (what batching_server.py relies on).

usage: python3 servers/inspect_cb_api.py [--source-dir DIR]
With --source-dir, the source of continuous_api.py, requests.py and ContinuousBatchingConfig
is written there for reading.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import os
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source-dir", default=None)
    args = parser.parse_args()

    import torch
    import transformers
    from transformers.generation.continuous_batching import continuous_api, requests

    print(f"python {sys.version.split()[0]}  torch {torch.__version__}  transformers {transformers.__version__}")
    print(f"cuda {torch.version.cuda}  device {torch.cuda.get_device_name(0) if torch.cuda.is_available() else '-'}")
    mixin = continuous_api.ContinuousMixin
    manager = continuous_api.ContinuousBatchingManager
    for owner, names in ((mixin, ("init_continuous_batching", "generate_batch")),
                         (manager, ("__init__", "start", "warmup", "add_request", "register_result_handler",
                                    "get_result", "request_id_iter", "cancel_request", "stop", "is_running"))):
        for name in names:
            fn = getattr(owner, name, None)
            print(f"{owner.__name__}.{name}{inspect.signature(fn) if fn else ': MISSING'}")
    try:
        from transformers.generation.configuration_utils import ContinuousBatchingConfig
        if dataclasses.is_dataclass(ContinuousBatchingConfig):
            for f in dataclasses.fields(ContinuousBatchingConfig):
                print(f"ContinuousBatchingConfig.{f.name} = {f.default!r}")
        else:
            print(f"ContinuousBatchingConfig{inspect.signature(ContinuousBatchingConfig)}")
    except ImportError as exc:
        ContinuousBatchingConfig = None
        print(f"ContinuousBatchingConfig: not importable ({exc})")
    print("GenerationOutput fields:", [f.name for f in dataclasses.fields(requests.GenerationOutput)])
    print("RequestStatus:", [s.name for s in requests.RequestStatus])

    if args.source_dir:
        os.makedirs(args.source_dir, exist_ok=True)
        with open(os.path.join(args.source_dir, "continuous_api.py.txt"), "w") as f:
            f.write(inspect.getsource(continuous_api))
        with open(os.path.join(args.source_dir, "requests.py.txt"), "w") as f:
            f.write(inspect.getsource(requests))
        if ContinuousBatchingConfig is not None:
            with open(os.path.join(args.source_dir, "cb_config.py.txt"), "w") as f:
                f.write(inspect.getsource(ContinuousBatchingConfig))
    return 0


if __name__ == "__main__":
    sys.exit(main())
