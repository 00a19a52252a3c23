"""The production `WeightMover`: infra.storage's verified copy between two stacks' S3-compatible stores."""
from __future__ import annotations

from infra.errors import StorageError
from infra.lifecycle.deployer import Progress
from infra.lifecycle.migrate import Transfer
from infra.stack.stackfile import Stack


def _store(stack: Stack):
    """(settings for the bucket holding the model, model prefix) in the stack's store."""
    from infra.lifecycle.secrets import resolver
    from infra.storage.settings import StoreSettings

    # The model's prefix is the same in every stack; the bucket is each stack's own storage.bucket.
    return StoreSettings.from_stack(stack, resolver(stack)), stack.deployment.model.weights_prefix


def _pairs(src: Stack, dst: Stack) -> list[tuple[str, str]]:
    """(source prefix, destination prefix) of the model and of each of dst's adapters that src serves by the same
    name: a migration carries the adapters with the model."""
    theirs = {a.name: a.weights for a in src.deployment.model.adapters}
    pairs = [(src.deployment.model.weights_prefix, dst.deployment.model.weights_prefix)]
    return pairs + [(theirs[a.name], a.weights) for a in dst.deployment.model.adapters if a.name in theirs]


def _prefixes(stack: Stack) -> list[str]:
    return [stack.deployment.model.weights_prefix] + [a.weights for a in stack.deployment.model.adapters]


class StoreWeights:
    """Copies a model from one stack's store to another's: streamed part by part, skipped when present."""

    def size(self, stack: Stack) -> int:
        """Bytes of the model, from the manifest in the stack's store."""
        from infra.storage import remote
        from infra.storage.transfer import Store

        settings, _ = _store(stack)
        return sum(remote.read_manifest(Store.of(settings), p).total for p in _prefixes(stack))

    def copy(self, src: Stack, dst: Stack, progress: Progress) -> Transfer:
        """Copy what dst's bucket lacks into it, creating it if missing (resumable: files there are skipped)."""
        from infra.storage.bucket import ensure_bucket
        from infra.storage.sync import copy

        (s, _), (d, _) = _store(src), _store(dst)
        if ensure_bucket(d):  # B is brought up after the copy; its `up` adopts the bucket
            progress(f"created bucket {d.bucket} at {d.endpoint}")
        total = moved = seconds = 0
        for s_prefix, d_prefix in _pairs(src, dst):
            result = copy(s, s_prefix, d, d_prefix)
            progress(result.summary)
            total, moved, seconds = total + result.manifest.total, moved + result.bytes_moved, seconds + result.seconds
        return Transfer(total, moved, seconds)

    def verify(self, stack: Stack) -> None:
        """Re-hash every stored file against the manifest; StorageError naming the bad files."""
        from infra.storage.verify import verify

        settings, _ = _store(stack)
        for prefix in _prefixes(stack):  # the model, then each adapter
            result = verify(settings, prefix)
            if not result.ok:
                bad = "; ".join(f"{b.path}: {b.problem}" for b in result.bad[:5])
                raise StorageError(f"{len(result.bad)} file(s) of {settings.where(prefix)} do not match the "
                                   f"manifest: {bad}", "run the migration again: the copy replaces what does not "
                                   "match", where=stack.name)
