from setuptools import find_packages, setup

setup(
    name="ssan_plugin",
    version="0.1.0",
    description="fairseq plugin: selective (SSAN) and directional self-attention encoders",
    python_requires=">=3.11,<3.12",
    packages=find_packages(include=["ssan_plugin", "ssan_plugin.*"]),
    # Installed by `make install` in a fixed order (torch CPU build, then fairseq-fixed
    # without build isolation); listed here pinned so that the metadata is honest.
    install_requires=[
        "torch==2.13.0",
        "fairseq-fixed==0.12.3.1",
        "hydra-core==1.3.2",
        "omegaconf==2.3.0",
        "sacrebleu==2.6.0",
        "sentencepiece==0.2.3",
        "sacremoses==0.2.0",
    ],
)
