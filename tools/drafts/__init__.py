"""drafts: the one draft-training pipeline under tools/, shared by its call sites.
Each call site is a command line with its own data source; the model, training,
evaluation and export steps are these modules', parameterised by the recipe
(recipes.py: by model and device) and the device.

  call site                         data                                   drafts                           device
  tools/models/train_demo.py        this Python's standard library        target, draft LM, EAGLE-1 head   cpu
  tools/models/train_eagle3_demo.py the demo's corpus windows              EAGLE-3 head                     cpu
  tools/models/smollm2_drafts.py    SmolLM2's greedy answers (llama.cpp)  EAGLE-1 head, draft LM, EAGLE-3  cpu
  tools/gpu/smollm2_gpu.py          SmolLM2's greedy answers (PyTorch)    EAGLE-1 heads on nested shares   cuda or cpu

Modules, one job each:

  heads    the EAGLE-1 head (EagleHead, unrollable) and the EAGLE-3 head (Eagle3Head),
           their losses, loading a saved head
  train    the LR schedule, the per-stage time cap, one optimizer step, checkpoints,
           batches of answer rows and the epoch loop over them
  eval     perplexity, a head's agreement with the target by depth, calibration
  recipes  every draft's sizes, step counts and learning rates, by model and
           device (the profile table)

The files a head is written to are c2ttools.heads'; progress lines
c2ttools.progress'.  Importing: the entry script puts tools/ on sys.path;
importing this package sets OMP_WAIT_POLICY (below), so an entry script imports
it before torch."""
import os

# The C build/tests share these 2 cores: with the default (spinning) OpenMP wait
# policy a 2-thread torch process slows down ~6x as soon as another process is
# runnable; sleeping waiters cost little when the machine is idle. Must be set
# before torch (libgomp) loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
