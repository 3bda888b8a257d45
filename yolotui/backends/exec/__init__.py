"""The backend of `yolotui exec -- COMMAND`: any command, supervised but opaque: backend.py."""
