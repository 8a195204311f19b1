"""An S3-compatible server on loopback for the tests: moto's server mode (PyPI `moto[server]`), a
real HTTP S3 endpoint with conditional writes (If-None-Match), which delta-rs commits rely on."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

# Credentials the tests' clients send (moto accepts any): distinctive, so that a sweep can tell
# whether one reached an output.
ACCESS_KEY = "AKIAAMQPCAPTESTKEY01"
SECRET_KEY = "amqpcap-test-secret-4f1c9e0b7d2a"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """A running server; its endpoint URL."""
    port = _free_port()
    process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(endpoint, timeout=1)
                break
            except OSError:
                if process.poll() is not None:
                    raise RuntimeError("moto's server did not start") from None
                time.sleep(0.1)
        yield endpoint
    finally:
        process.terminate()
        process.wait(timeout=30)


def credentials() -> dict[str, str]:
    """The standard AWS environment, credentials only (the endpoint is for the caller to give)."""
    return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": "us-east-1"}


def client(endpoint: str):
    import boto3
    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                        region_name="us-east-1")


def upload(s3, bucket: str, prefix: str, files: list[Path], root: Path) -> None:
    for path in files:
        s3.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(root)}")


def every_object(s3, bucket: str) -> Iterator[tuple[str, bytes]]:
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            yield item["Key"], s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()


def environment(**extra: str) -> dict[str, str]:
    """os.environ without any AWS setting of the machine's, plus the test credentials and `extra`."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("AWS_")}, **credentials(), **extra}
