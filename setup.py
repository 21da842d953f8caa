"""The folders of the design card, mapped into one import package, `vkocr` (DESIGN.md, "Layout").

Every subpackage under each folder is discovered here; pyproject.toml holds everything else.
"""

from setuptools import find_packages, setup

FOLDERS = {
    "vkocr": "proto/vkocr",  # the public API (__init__.py) and the wire contract (v1/)
    "vkocr.engine": "vk",
    "vkocr.agent": "agent",
    "vkocr.postproc": "postproc",
    "vkocr.shaders": "shaders",
}

packages = [
    f"{name}.{sub}" if sub else name
    for name, folder in FOLDERS.items()
    for sub in ["", *find_packages(folder)]
]
if __name__ == "__main__":  # setuptools runs this file as __main__; scripts/lint.sh imports FOLDERS
    setup(packages=packages, package_dir=FOLDERS)
