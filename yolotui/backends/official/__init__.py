"""Everything yolotui knows about the official YOLOv9 repository (WongKinYiu/yolov9), in one place.

- backend.py: the Backend (command building, resume from a usable last.pt, remedies it takes);
- shim.py: runs the official `train_dual.py` in the user's interpreter and writes yolotui's events, through
  shim_report.py (the reporter: events from the official trainer's own values);
- weights.py: reading official checkpoints (pickled classes) into plain tensors, without unpickling code
  (torch);
- diagnosis.py / environment.py: doctor's view of an official run folder and of the interpreter that runs it;
- opt_edit.py: editing opt.yaml for a resumed attempt (the official --resume reads its options there).
"""
