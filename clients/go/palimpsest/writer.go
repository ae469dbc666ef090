package palimpsest

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"

	pb "palimpsest.dev/go/gen/palimpsest/v1"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Writer appends batches over one AppendStream: no per-call cost, for
// high-rate writers. Append is safe for concurrent use; each batch is answered
// with its seqs or with the *Error the unary Append would return (a refused
// batch fails alone, later batches still land), and a session's batches are
// answered in the order they were sent.
type Writer struct {
	stream pb.SessionService_AppendStreamClient
	cancel context.CancelFunc
	done   chan struct{}

	sendMu sync.Mutex // one Send or CloseSend at a time
	closed bool       // guarded by sendMu

	mu      sync.Mutex // pending, next, err
	pending map[string]chan batchResult
	next    uint64
	err     error // why the stream ended (nil: it ended OK)
	ended   bool
}

type batchResult struct {
	seqs []int64
	err  error
}

// ErrWriterClosed is returned by Append after Close.
var ErrWriterClosed = errors.New("palimpsest: the writer is closed; open another with AppendStream")

// AppendStream opens a Writer; ctx bounds the whole stream (cancelling it
// fails every outstanding batch). Close it when done.
func (c *Client) AppendStream(ctx context.Context) (*Writer, error) {
	sctx, cancel := context.WithCancel(c.ctx(ctx))
	stream, err := c.Raw.AppendStream(sctx)
	if err != nil {
		cancel()
		return nil, AsError(err)
	}
	w := &Writer{stream: stream, cancel: cancel, done: make(chan struct{}), pending: map[string]chan batchResult{}}
	go w.receive()
	return w, nil
}

func (w *Writer) receive() {
	defer close(w.done)
	for {
		res, err := w.stream.Recv()
		if err != nil {
			w.mu.Lock()
			w.ended = true
			if err != io.EOF {
				w.err = AsError(err)
			}
			failure := w.err
			if failure == nil && len(w.pending) > 0 {
				failure = &Error{Code: codes.Unknown, CodeName: "UNKNOWN", Message: "the stream ended before answering every batch", Metadata: map[string]string{}}
			}
			for id, ch := range w.pending {
				ch <- batchResult{err: failure}
				delete(w.pending, id)
			}
			w.mu.Unlock()
			return
		}
		w.mu.Lock()
		ch, ok := w.pending[res.GetCorrelationId()]
		delete(w.pending, res.GetCorrelationId())
		w.mu.Unlock()
		if !ok {
			continue
		}
		if st := res.GetError(); st != nil {
			ch <- batchResult{err: BatchError(st)}
		} else {
			ch <- batchResult{seqs: seqsIn(res.GetAppended().GetSeqs())}
		}
	}
}

// BatchError decodes a refused batch's status into *Error, as AsError decodes
// a failed call.
func BatchError(st *pb.BatchStatus) error {
	return AsError(status.ErrorProto(&spb.Status{Code: st.GetCode(), Message: st.GetMessage(), Details: st.GetDetails()}))
}

// Append sends events as one atomic batch and waits for its answer: the seqs,
// or the *Error the unary Append would return (HEAD_MISMATCH, ...). The same
// options, idempotency key and derived message ids as Client.Append. A ctx
// that ends first returns ctx.Err(); the batch may still land (retry it with
// the same IdempotencyKey).
func (w *Writer) Append(ctx context.Context, id string, events []*pb.EventInput, o AppendOptions) ([]int64, error) {
	key := o.IdempotencyKey
	if key == "" {
		key = newKey()
	}
	events, err := withIDs(key, events)
	if err != nil {
		return nil, err
	}
	ch := make(chan batchResult, 1)
	w.sendMu.Lock()
	if w.closed {
		w.sendMu.Unlock()
		return nil, ErrWriterClosed
	}
	w.mu.Lock()
	if w.ended {
		err := w.err
		w.mu.Unlock()
		w.sendMu.Unlock()
		if err == nil {
			err = ErrWriterClosed
		}
		return nil, err
	}
	cid := strconv.FormatUint(w.next, 10)
	w.next++
	w.pending[cid] = ch
	w.mu.Unlock()
	err = w.stream.Send(&pb.AppendStreamRequest{
		CorrelationId: cid,
		Append:        &pb.AppendEventsRequest{SessionId: id, Events: events, ExpectedLastSeq: o.ExpectedLastSeq, IdempotencyKey: key},
	})
	w.sendMu.Unlock()
	if err != nil {
		// The stream broke: Recv reports why and answers this batch with it.
		w.mu.Lock()
		_, still := w.pending[cid]
		w.mu.Unlock()
		if still {
			<-w.done
		}
	}
	select {
	case r := <-ch:
		return r.seqs, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Outstanding is the number of batches sent and not answered yet.
func (w *Writer) Outstanding() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

// Close half-closes the stream and waits until every outstanding batch is
// answered and the server ends it; it returns the stream's error, if it broke.
func (w *Writer) Close() error {
	w.sendMu.Lock()
	if !w.closed {
		w.closed = true
		_ = w.stream.CloseSend()
	}
	w.sendMu.Unlock()
	<-w.done
	w.cancel()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}
