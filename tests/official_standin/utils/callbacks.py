"""Stand-in hooks object: the official hook names, actions run in registration order."""

HOOKS = ("on_pretrain_routine_start", "on_pretrain_routine_end", "on_train_start", "on_train_epoch_start",
         "on_train_batch_start", "optimizer_step", "on_before_zero_grad", "on_train_batch_end",
         "on_train_epoch_end", "on_val_start", "on_val_batch_start", "on_val_image_end", "on_val_batch_end",
         "on_val_end", "on_fit_epoch_end", "on_model_save", "on_train_end", "on_params_update", "teardown")


class Callbacks:
    def __init__(self):
        self._callbacks = {hook: [] for hook in HOOKS}
        self.stop_training = False

    def register_action(self, hook, name="", callback=None):
        assert hook in self._callbacks, f"unknown hook {hook}"
        assert callable(callback), "callback must be callable"
        self._callbacks[hook].append({"name": name, "callback": callback})

    def run(self, hook, *args, **kwargs):
        assert hook in self._callbacks, f"unknown hook {hook}"
        for action in self._callbacks[hook]:
            action["callback"](*args, **kwargs)
