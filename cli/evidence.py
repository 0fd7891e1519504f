"""``fptrack evidence``: evidence bundles a recipient can check (services/evidence/bundle.py does the work;
this module parses options and prints). ``verify`` needs no database and no network: a recipient runs it on
the zip alone."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from fptrack.cli.common import CliContext, CliError, friendly_errors, pass_context

__all__ = ["evidence"]

UNVERIFIED_EXIT = 3  # intact, but signed by a key nobody vouched for


@click.group()
def evidence() -> None:
    """Evidence bundles: made signed (and timestamped), checked offline.

    \b
      fptrack evidence bundle --match 12 -o match-12.zip
      fptrack evidence verify match-12.zip --key owner.pub [--tsa-cert tsa.pem]
      fptrack evidence key [--cert c.pem]  the installation's public key (give it to recipients)
      fptrack evidence stamp               time-stamp the captures of flagged pages not stamped yet

    Settings: FPTRACK_SIGNING_KEY_FILE, FPTRACK_TSA_URL (docs/evidence.md)."""


@evidence.command("bundle")
@click.option("--match", "match_id", type=int, required=True, help="The match id.")
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True, help="The zip to write."
)
@pass_context
@friendly_errors
def bundle(context: CliContext, match_id: int, output: Path) -> None:
    """Write the external evidence bundle of a match (no internal notes, no user names)."""
    from fptrack.services.evidence.bundle import BundleError, build_bundle

    with context.session() as session:
        try:
            data = build_bundle(session, match_id, context.settings)
        except BundleError as error:
            raise CliError(str(error)) from None
    output.write_bytes(data)
    stamp = "timestamped" if context.settings.tsa_url else "not timestamped"
    click.echo(f"wrote {output} ({len(data):,} bytes; signed, {stamp})")


@evidence.command("verify")
@click.argument(
    "bundle_file", metavar="FILE.zip", type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option(
    "--key",
    "key_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The rights holder's public key (PEM), got from them: the bundle must be signed with it.",
)
@click.option(
    "--fingerprint",
    help="The rights holder's published key fingerprint (SHA256:<hex>, as `fptrack evidence key` prints it): "
    "the bundle must be signed with that key.",
)
@click.option(
    "--tsa-cert",
    "--tsa-ca",
    "tsa_cert",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The time-stamping authorities' certificates (PEM, one or several) you trust: each token must "
    "chain to one of them. Default: the system's trust store, so a self-made authority fails (UNTRUSTED "
    "TIMESTAMP).",
)
@click.option(
    "--ca",
    "key_ca",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The certification authority's certificate (PEM, one or several) you trust to name the rights "
    "holder: the bundle's signing-key.crt must certify its key and chain to one of them (instead of --key).",
)
def verify(
    bundle_file: Path,
    key_file: Path | None,
    fingerprint: str | None,
    tsa_cert: Path | None,
    key_ca: Path | None,
) -> None:
    """Check a bundle offline: every file against SHA256SUMS, the signature, the timestamps (of the capture,
    of SHA256SUMS and of the signature: each from an authority you trust), and every claim of evidence.json
    against the WARC it carries. Exit 0 (OK) only when all hold and the key is the one given (--key or
    --fingerprint); 1 and the reason when a check fails (UNTRUSTED TIMESTAMP: a token from an authority
    neither the system nor --tsa-cert trusts); 3 (UNVERIFIED ORIGIN) when all hold but nothing ties the
    signing key to its owner: anyone can sign a bundle with a key of their own."""
    from cryptography import x509

    from fptrack.services.evidence.bundle import MAX_BUNDLE_BYTES, verify_bundle

    def certificates_of(path: Path | None) -> list[x509.Certificate] | None:
        if path is None:
            return None
        try:
            return x509.load_pem_x509_certificates(path.read_bytes())
        except ValueError as error:
            raise CliError(f"{path} is not a PEM certificate: {error}") from None

    certificates = certificates_of(tsa_cert)
    authorities = certificates_of(key_ca)
    size = bundle_file.stat().st_size
    if size > MAX_BUNDLE_BYTES:
        click.echo(f"FAILED: larger than a bundle can be ({size:,} bytes > {MAX_BUNDLE_BYTES:,})", err=True)
        sys.exit(1)
    result = verify_bundle(
        bundle_file.read_bytes(),
        trusted_key=key_file.read_bytes() if key_file is not None else None,
        trusted_fingerprint=fingerprint,
        tsa_cert=certificates,
        key_ca=authorities,
    )
    for line in result.lines:
        click.echo(line)
    if not result.intact:
        click.echo(result.verdict, err=True)
        sys.exit(1)
    if not result.ok:
        click.echo(result.verdict, err=True)
        sys.exit(UNVERIFIED_EXIT)
    click.echo(f"OK: {bundle_file}")


@evidence.command("key")
@click.option(
    "--cert",
    "certificate",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Install the X.509 certificate (PEM, then any intermediates) an authority issued for this key: "
    "checked to certify it, carried in every bundle from then on (verify --ca).",
)
@pass_context
@friendly_errors
def key(context: CliContext, certificate: Path | None) -> None:
    """Print the installation's public signing key (PEM) and its fingerprint (generated on first use), and the
    certificate installed for it; with --cert, install one first."""
    from fptrack.services.evidence.bundle import (
        BundleError,
        certificate_path,
        install_key_certificate,
        key_certificate,
        key_fingerprint,
        load_signing_key,
        public_key_pem,
    )

    public = load_signing_key(context.settings).public_key()
    try:
        if certificate is not None:
            leaf = install_key_certificate(context.settings, certificate.read_bytes())
            click.echo(
                f"installed {certificate_path(context.settings)}: {leaf.subject.rfc4514_string()}, issued by "
                f"{leaf.issuer.rfc4514_string()}"
            )
        installed = key_certificate(context.settings, public)
    except BundleError as error:
        raise CliError(str(error)) from None
    click.echo(public_key_pem(public).decode("ascii"), nl=False)
    click.echo(f"fingerprint: {key_fingerprint(public)}")
    if installed is not None:
        click.echo(f"certificate: {certificate_path(context.settings)}")


@evidence.command("stamp")
@click.option(
    "--limit", type=click.IntRange(min=1), default=1000, show_default=True, help="At most this many."
)
@pass_context
@friendly_errors
def stamp(context: CliContext, limit: int) -> None:
    """Time-stamp the captures of flagged pages that have none yet (the authority was unreachable when they
    were flagged, or FPTRACK_TSA_URL was set since): each kept exchange's capture statement gets an RFC 3161
    token from FPTRACK_TSA_URL, stored beside it and carried by its bundles. Exit 1 when the authority fails
    (what is left stays for the next run)."""
    from fptrack.jobs.capture_stamps import stamp_captures
    from fptrack.services.evidence.bundle import TSA_TIMEOUT

    if not context.settings.tsa_url:
        raise CliError("FPTRACK_TSA_URL is not set: there is no time-stamping authority to ask")
    with context.session() as session:
        done = stamp_captures(session, context.settings, timeout=TSA_TIMEOUT, limit=limit)
    click.echo(f"stamped {done.stamped} capture(s); {done.left} left")
    if done.error is not None:
        raise CliError(f"the time-stamping authority failed: {done.error}")
