"""The code-signing key pair and file signatures in BOINC's format (reference/protocol.md §7)."""

import hashlib

import pytest

from protocol import signing


@pytest.fixture(scope="module")
def key():
    return signing.generate_key_pair()


def test_a_key_pair_has_a_1024_bit_modulus_and_works(key):
    assert key.bits == 1024
    assert key.p * key.q == key.n
    assert pow(pow(12345, key.e, key.n), key.d, key.n) == 12345


def test_public_key_text_is_bits_then_256_bytes_of_hex_32_a_line_then_a_dot(key):
    text = signing.public_key_text(key.public())
    lines = text.splitlines()
    assert lines[0] == "1024"
    assert lines[-1] == "."
    assert len(lines) == 1 + 8 + 1
    assert all(len(line) == 64 and line == line.lower() for line in lines[1:-1])
    data = bytes.fromhex("".join(lines[1:-1]))
    assert int.from_bytes(data[:128], "big") == key.n
    assert int.from_bytes(data[128:], "big") == 65537
    assert signing.parse_public_key(text) == key.public()


def test_private_key_text_round_trips(key):
    assert signing.parse_private_key(signing.private_key_text(key)) == key


def test_a_signature_is_the_padded_ascii_md5_raised_to_the_private_exponent(key):
    md5 = hashlib.md5(b"#!/bin/sh\nexit 0\n").hexdigest()
    signature = signing.sign_md5(md5, key)
    lines = signature.splitlines()
    assert lines[-1] == "." and len(lines) == 5
    value = int.from_bytes(bytes.fromhex("".join(lines[:-1])), "big")
    block = pow(value, key.e, key.n).to_bytes(128, "big")
    assert block[:2] == b"\x00\x01"
    assert block[2 : 128 - 33] == b"\xff" * (128 - 35)
    assert block[-33:] == b"\x00" + md5.encode()
    assert signing.verify_md5(md5, signature, key.public())
    assert not signing.verify_md5(hashlib.md5(b"other").hexdigest(), signature, key.public())


def test_keys_are_written_once_and_the_private_one_is_owner_only(tmp_path):
    key = signing.write_key_pair(tmp_path, bits=512)
    assert signing.load_private_key(tmp_path) == key
    assert signing.load_public_key_text(tmp_path) == signing.public_key_text(key.public())
    assert (tmp_path / "code_sign_private").stat().st_mode & 0o077 == 0
    with pytest.raises(signing.SigningError):
        signing.write_key_pair(tmp_path, bits=512)


def test_a_project_without_keys_has_no_public_key_and_cannot_sign(tmp_path):
    assert signing.load_public_key_text(tmp_path) == ""
    with pytest.raises(signing.SigningError, match="make_signing_keys"):
        signing.load_private_key(tmp_path)


def test_bad_key_text_is_refused():
    with pytest.raises(signing.SigningError):
        signing.parse_public_key("1024\nzz\n.\n")
    with pytest.raises(signing.SigningError):
        signing.parse_public_key("many\n00\n.\n")
