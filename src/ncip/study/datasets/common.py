"""What the loaders share: stable sample ids and a check for network access."""

from __future__ import annotations

import socket

import numpy as np


def sample_ids(name: str, part: str, n: int) -> np.ndarray:
    """``<dataset>:<part>:<index>`` ids, zero-padded to one width."""
    width = len(str(max(n - 1, 0)))
    return np.array([f"{name}:{part}:{i:0{width}d}" for i in range(n)])


def online(host: str, port: int = 443, timeout: float = 3.0) -> bool:
    try:
        socket.create_connection((host, port), timeout=timeout).close()
        return True
    except OSError:
        return False
