"""YOLOv9 and GELAN models: building blocks, heads, the YAML builder and the shipped configs."""
