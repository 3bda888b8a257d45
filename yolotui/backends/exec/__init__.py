"""The backend of `yolotui exec -- COMMAND`: any command, supervised but opaque: see backend.py."""
