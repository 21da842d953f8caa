"""Generated from proto/vkocr/v1/*.proto by scripts/gen_proto.py: the wire contract of the agent."""
