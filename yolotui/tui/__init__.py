"""The Textual app. Nothing here imports torch; everything shown is rebuilt from run directories."""
