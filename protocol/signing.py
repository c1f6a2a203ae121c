"""The project's code-signing key pair and BOINC-format file signatures (reference/protocol.md §7).

A client that is not on the anonymous platform runs an executable only if its ``<file_info>``
carries a ``file_signature`` that the project's public key (``code_sign_key``, sent once and
then trusted) verifies.

Formats (lib/crypt.cpp's hex key layout):

- a key is the decimal bit count on a line, then the key's bytes in lowercase hex, 32 bytes a
  line, then a line holding ``.``. The public key's bytes are the modulus and the public
  exponent, each left-padded to 128 bytes. The private key's are, in the same layout, the
  modulus, public exponent and private exponent (128 bytes each), then the two primes, the two
  prime exponents and the coefficient (64 bytes each);
- a signature is the 32 lowercase hex digits of the file's MD5, as ASCII, padded PKCS#1 v1.5
  type 1 without a DigestInfo (``00 01 FF .. FF 00 <32 bytes>``) and raised to the private
  exponent; written as 128 bytes in the same hex layout.

The modulus is 1024 bits, the most client 7.20.5 accepts (``MAX_RSA_MODULUS_BITS``). Keys are
made from the operating system's random source with Miller-Rabin tested primes. Real projects
keep the private key off the server and sign offline; ``make_signing_keys`` writes it beside the
public key in the project's keys directory (``Project.keys_dir``: ``BOINCWEB_DATA_DIR/keys`` for
the demo project, ``BOINCWEB_DATA_DIR/projects/<slug>/keys`` for the others) with owner-only
permissions. Each project has its own pair, as each BOINC project has.
"""

from __future__ import annotations

import hashlib
import math
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from backend.models import AppVersion
    from protocol.models import AppVersionFile

BITS = 1024
MAX_BYTES = 128
PUBLIC_EXPONENT = 65537
SMALL_PRIMES = [p for p in range(3, 2000) if all(p % d for d in range(2, int(p**0.5) + 1))]


class SigningError(ValueError):
    pass


@dataclass(frozen=True)
class PrivateKey:
    n: int
    e: int
    d: int
    p: int
    q: int

    @property
    def bits(self) -> int:
        return self.n.bit_length()

    def public(self) -> PublicKey:
        return PublicKey(self.n, self.e)


@dataclass(frozen=True)
class PublicKey:
    n: int
    e: int

    @property
    def bits(self) -> int:
        return self.n.bit_length()


def is_probable_prime(n: int, rounds: int = 40) -> bool:
    if n < 2:
        return False
    for p in SMALL_PRIMES:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for _ in range(rounds):
        x = pow(secrets.randbelow(n - 3) + 2, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = pow(x, 2, n)
            if x == n - 1:
                break
        else:
            return False
    return True


def random_prime(bits: int) -> int:
    while True:
        candidate = secrets.randbits(bits) | (1 << (bits - 1)) | (1 << (bits - 2)) | 1
        if math.gcd(candidate - 1, PUBLIC_EXPONENT) == 1 and is_probable_prime(candidate):
            return candidate


def generate_key_pair(bits: int = BITS) -> PrivateKey:
    """A fresh RSA key pair of exactly ``bits`` bits (a PrivateKey; ``.public()`` its half)."""
    if not 512 <= bits <= BITS:
        raise SigningError(f"key size must be 512 to {BITS} bits, not {bits}")
    while True:
        p, q = random_prime(bits // 2), random_prime(bits - bits // 2)
        n = p * q
        if p != q and n.bit_length() == bits:
            d = pow(PUBLIC_EXPONENT, -1, (p - 1) * (q - 1))
            return PrivateKey(n=n, e=PUBLIC_EXPONENT, d=d, p=max(p, q), q=min(p, q))


def hex_lines(data: bytes) -> str:
    """``data`` in lowercase hex, 32 bytes a line, then ``.``; each line ends with a newline."""
    lines = [data[i : i + 32].hex() for i in range(0, len(data), 32)]
    return "\n".join(lines) + "\n.\n"


def read_hex_lines(text_: str) -> bytes:
    body = []
    for line in text_.strip().splitlines():
        line = line.strip()
        if line == ".":
            break
        body.append(line)
    try:
        return bytes.fromhex("".join(body))
    except ValueError:
        raise SigningError("the key or signature is not hexadecimal") from None


def fixed(value: int, size: int) -> bytes:
    return value.to_bytes(size, "big")


def public_key_text(key: PublicKey) -> str:
    return f"{key.bits}\n" + hex_lines(fixed(key.n, MAX_BYTES) + fixed(key.e, MAX_BYTES))


def private_key_text(key: PrivateKey) -> str:
    half = MAX_BYTES // 2
    parts = [
        fixed(key.n, MAX_BYTES),
        fixed(key.e, MAX_BYTES),
        fixed(key.d, MAX_BYTES),
        fixed(key.p, half),
        fixed(key.q, half),
        fixed(key.d % (key.p - 1), half),
        fixed(key.d % (key.q - 1), half),
        fixed(pow(key.q, -1, key.p), half),
    ]
    return f"{key.bits}\n" + hex_lines(b"".join(parts))


def split_key_text(text_: str) -> tuple[int, bytes]:
    first, _, rest = text_.strip().partition("\n")
    try:
        bits = int(first)
    except ValueError:
        raise SigningError("a key starts with its size in bits") from None
    return bits, read_hex_lines(rest)


def parse_public_key(text_: str) -> PublicKey:
    bits, data = split_key_text(text_)
    if len(data) != 2 * MAX_BYTES:
        raise SigningError(f"a public key holds {2 * MAX_BYTES} bytes, not {len(data)}")
    key = PublicKey(int.from_bytes(data[:MAX_BYTES], "big"), int.from_bytes(data[MAX_BYTES:], "big"))
    if key.bits != bits:
        raise SigningError(f"the key says {bits} bits but its modulus has {key.bits}")
    return key


def parse_private_key(text_: str) -> PrivateKey:
    bits, data = split_key_text(text_)
    half = MAX_BYTES // 2
    if len(data) != 3 * MAX_BYTES + 5 * half:
        raise SigningError(f"a private key holds {3 * MAX_BYTES + 5 * half} bytes, not {len(data)}")
    n, e, d = (int.from_bytes(data[i * MAX_BYTES : (i + 1) * MAX_BYTES], "big") for i in range(3))
    p = int.from_bytes(data[3 * MAX_BYTES : 3 * MAX_BYTES + half], "big")
    q = int.from_bytes(data[3 * MAX_BYTES + half : 3 * MAX_BYTES + 2 * half], "big")
    key = PrivateKey(n=n, e=e, d=d, p=p, q=q)
    if key.bits != bits or p * q != n:
        raise SigningError("the private key is inconsistent")
    return key


def padded_block(message: bytes, size: int) -> bytes:
    """PKCS#1 v1.5 type 1 padding of ``message`` without a DigestInfo, ``size`` bytes long."""
    if len(message) > size - 11:
        raise SigningError("the message is too long for the key")
    return b"\x00\x01" + b"\xff" * (size - 3 - len(message)) + b"\x00" + message


def sign_md5(md5_hex: str, key: PrivateKey) -> str:
    """The ``file_signature`` text for a file whose MD5 is ``md5_hex``."""
    size = (key.bits + 7) // 8
    block = int.from_bytes(padded_block(md5_hex.encode("ascii"), size), "big")
    return hex_lines(fixed(pow(block, key.d, key.n), size))


def verify_md5(md5_hex: str, signature: str, key: PublicKey) -> bool:
    """Whether ``signature`` (text) signs ``md5_hex`` under the public ``key``."""
    size = (key.bits + 7) // 8
    data = read_hex_lines(signature)
    if len(data) != size:
        return False
    recovered = fixed(pow(int.from_bytes(data, "big"), key.e, key.n), size)
    return recovered == padded_block(md5_hex.encode("ascii"), size)


def file_md5(path: str | os.PathLike[str]) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_key_pair(directory: str | os.PathLike[str], *, bits: int = BITS, replace: bool = False) -> PrivateKey:
    """Make and store a project's key pair in ``directory`` (its ``keys_dir``); returns the
    PrivateKey."""
    directory = Path(directory)
    private_path = directory / "code_sign_private"
    if private_path.exists() and not replace:
        raise SigningError(f"{private_path} exists; pass replace=True to make a new pair")
    key = generate_key_pair(bits)
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(private_key_text(key))
    (directory / "code_sign_public").write_text(public_key_text(key.public()))
    return key


def load_public_key_text(directory: str | os.PathLike[str]) -> str:
    """The public key in ``directory`` as the client receives it, or "" when there is none."""
    path = Path(directory) / "code_sign_public"
    return path.read_text() if path.exists() else ""


def load_private_key(directory: str | os.PathLike[str]) -> PrivateKey:
    path = Path(directory) / "code_sign_private"
    if not path.exists():
        raise SigningError(f"no private key at {path}; run manage.py make_signing_keys")
    return parse_private_key(path.read_text())


def add_app_version_file(
    app_version: AppVersion,
    source: str | os.PathLike[str],
    *,
    name: str | None = None,
    main_program: bool = True,
    key: PrivateKey | None = None,
) -> AppVersionFile:
    """Copy ``source`` into the download directory of the app version's project as a signed
    file of ``app_version``.

    The file is named ``name`` (default ``<app>_<version>_<source name>``) and signed with
    ``key`` (default the project's private key); returns the AppVersionFile row.
    """
    from backend.daemons.hierarchy import download_path, write_file
    from protocol.models import AppVersionFile

    project = app_version.project
    key = key or load_private_key(project.keys_dir)
    data = Path(source).read_bytes()
    name = name or f"{app_version.app.name}_{app_version.version_num}_{Path(source).name}"
    path = download_path(project, name)
    md5 = write_file(path, data)
    path.chmod(0o755)
    row, _ = AppVersionFile.objects.update_or_create(
        project=project,
        name=name,
        defaults=dict(
            app_version=app_version,
            nbytes=len(data),
            md5_cksum=md5,
            file_signature=sign_md5(md5, key),
            main_program=main_program,
        ),
    )
    return row
