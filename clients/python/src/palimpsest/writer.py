"""AppendWriter: AppendEvents batches pipelined over one ``AppendStream`` call, for high-rate
writers (the per-call cost of a unary call is paid once per stream).

Each :meth:`AppendWriter.append` returns a :class:`concurrent.futures.Future` that resolves to the
batch's seqs or fails with the :class:`PalimpsestError` the unary ``append`` would raise (decoded
from the batch's ``BatchStatus`` by :func:`palimpsest.errors.decode_status`). A refused batch fails
alone; a session's batches are answered in the order they were written; a broken stream fails
every outstanding batch."""
from __future__ import annotations

import queue
import threading
import uuid
from concurrent.futures import Future
from typing import Any, Dict, Iterator, List, Optional, Sequence

import grpc

from palimpsest.errors import PalimpsestError, decode_status
from palimpsest.events import with_derived_ids
from palimpsest.v1 import event_pb2, service_pb2

__all__ = ["AppendWriter", "batch_error"]

_CODES = {c.value[0]: c for c in grpc.StatusCode}
_END = object()


def batch_error(status: service_pb2.BatchStatus) -> PalimpsestError:
    """A refused batch's BatchStatus (a google.rpc.Status) as a PalimpsestError."""
    code = _CODES.get(status.code, grpc.StatusCode.UNKNOWN)
    return PalimpsestError(code.name, status.message, decode_status(status.SerializeToString()), code)


class AppendWriter:
    """A writer on one AppendStream; made by :meth:`palimpsest.client.Client.append_stream`.
    Use it as a context manager (``close`` on exit) or call :meth:`close`. ``append`` is safe to
    call from several threads."""

    def __init__(self, open_stream: Any):
        self._requests: "queue.Queue[Any]" = queue.Queue()
        self._lock = threading.Lock()
        self._pending: Dict[str, "Future[List[int]]"] = {}
        self._next = 0
        self._closed = False
        self._cancelled = False
        self._failure: Optional[BaseException] = None
        self._call = open_stream(self._iterate())
        self._reader = threading.Thread(target=self._read, name="palimpsest-append-stream", daemon=True)
        self._reader.start()

    def __enter__(self) -> "AppendWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def outstanding(self) -> int:
        """Batches written and not answered yet."""
        with self._lock:
            return len(self._pending)

    def append(self, session_id: str, events: Sequence[event_pb2.EventInput], expected_last_seq: Optional[int] = None,
               idempotency_key: Optional[str] = None) -> "Future[List[int]]":
        """Writes ``events`` as one atomic batch; the Future resolves to their seqs or fails with the
        PalimpsestError the unary ``append`` would raise (e.g. HEAD_MISMATCH). The same options,
        idempotency key and derived message ids as :meth:`Client.append`."""
        key = idempotency_key or f"py-{uuid.uuid4()}"
        batch = service_pb2.AppendEventsRequest(session_id=session_id, events=with_derived_ids(key, events), idempotency_key=key)
        if expected_last_seq is not None:
            batch.expected_last_seq = expected_last_seq
        future: "Future[List[int]]" = Future()
        with self._lock:
            if self._failure is not None:
                future.set_exception(self._failure)
                return future
            if self._closed:
                future.set_exception(PalimpsestError("FAILED_PRECONDITION", "the writer is closed; open another with append_stream()"))
                return future
            correlation_id = str(self._next)
            self._next += 1
            self._pending[correlation_id] = future
            # Queued under the lock: the stream carries batches in the order their ids were given.
            self._requests.put(service_pb2.AppendStreamRequest(correlation_id=correlation_id, append=batch))
        return future

    def append_sync(self, session_id: str, events: Sequence[event_pb2.EventInput], expected_last_seq: Optional[int] = None,
                    idempotency_key: Optional[str] = None, timeout: Optional[float] = None) -> List[int]:
        """:meth:`append` and wait for its answer: the seqs, or the PalimpsestError raised."""
        return self.append(session_id, events, expected_last_seq, idempotency_key).result(timeout)

    def close(self, timeout: Optional[float] = None) -> None:
        """Half-closes the stream and waits until every outstanding batch is answered and the
        server ends it. Raises the stream's PalimpsestError if it broke."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._requests.put(_END)
        self._reader.join(timeout)
        failure = self._failure
        if failure is not None and not (isinstance(failure, PalimpsestError) and failure.code == "CANCELLED" and self._cancelled):
            raise failure


    def cancel(self) -> None:
        """Ends the stream now; outstanding batches fail with CANCELLED."""
        with self._lock:
            self._closed = True
            self._cancelled = True
            self._requests.put(_END)
        self._call.cancel()

    def _iterate(self) -> Iterator[service_pb2.AppendStreamRequest]:
        while True:
            req = self._requests.get()
            if req is _END:
                return
            yield req

    def _read(self) -> None:
        try:
            for res in self._call:
                with self._lock:
                    future = self._pending.pop(res.correlation_id, None)
                if future is None:
                    continue
                if future.cancelled():  # the caller gave up on this batch; the others go on
                    continue
                kind = res.WhichOneof("result")
                if kind == "appended":
                    future.set_result(list(res.appended.seqs))
                elif kind == "error":
                    future.set_exception(batch_error(res.error))
                else:
                    future.set_exception(PalimpsestError("UNKNOWN", "the server answered a batch with neither seqs nor an error"))
            self._fail(None)
        except grpc.RpcError as e:
            self._fail(PalimpsestError.from_rpc_error(e))
        except BaseException as e:  # noqa: BLE001 - every outstanding batch must learn the stream ended
            self._fail(e)

    def _fail(self, err: Optional[BaseException]) -> None:
        with self._lock:
            if err is not None and self._failure is None:
                self._failure = err
            pending, self._pending = self._pending, {}
            already_closed = self._closed
            self._closed = True
        if not already_closed:
            # Ends the request iterator, so gRPC's request-consuming thread does not wait forever.
            self._requests.put(_END)
        for future in pending.values():
            if not future.cancelled():
                future.set_exception(err or PalimpsestError("UNKNOWN", f"the stream ended before answering {len(pending)} batch(es)"))
