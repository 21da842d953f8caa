"""Generated stubs of vkocr.v1 (scripts/gen_proto.py); never edited by hand."""
