package palimpsest

import (
	"context"
	"errors"
	"io"

	pb "palimpsest.dev/go/gen/palimpsest/v1"
)

// ListOptions select and page ListSessions: Labels must all match; PageSize 0 = the server's default.
type ListOptions struct {
	Labels   map[string]string
	PageSize uint32
}

// ListSessions returns every session matching o, newest first, following the pages (each page
// is one ListSessions call); use Raw.ListSessions for one page at a time.
func (c *Client) ListSessions(ctx context.Context, o ListOptions) ([]*pb.Session, error) {
	var out []*pb.Session
	token := ""
	for {
		res, err := c.Raw.ListSessions(c.ctx(ctx), &pb.ListSessionsRequest{PageSize: o.PageSize, PageToken: token, LabelSelector: o.Labels})
		if err != nil {
			return nil, AsError(err)
		}
		out = append(out, res.GetSessions()...)
		if token = res.GetNextPageToken(); token == "" {
			return out, nil
		}
	}
}

// ForkOptions: AtSeq nil = fork at the last event; ChildID "" = a generated id.
type ForkOptions struct {
	AtSeq   *int64
	ChildID string
	Labels  map[string]string
}

// Fork copies the session up to a boundary seq into a new child session and returns the child.
func (c *Client) Fork(ctx context.Context, id string, o ForkOptions) (*pb.Session, error) {
	req := &pb.ForkSessionRequest{SessionId: id, ChildSessionId: o.ChildID, Labels: o.Labels}
	if o.AtSeq != nil {
		at := seqOut(*o.AtSeq)
		req.AtSeq = &at
	}
	res, err := c.Raw.ForkSession(c.ctx(ctx), req)
	return res.GetSession(), AsError(err)
}

// Repair appends the closers of an interrupted turn (nothing for a balanced log) and returns them.
func (c *Client) Repair(ctx context.Context, id string) ([]*pb.SessionEvent, error) {
	res, err := c.Raw.RepairSession(c.ctx(ctx), &pb.RepairSessionRequest{SessionId: id})
	return res.GetEvents(), AsError(err)
}

// ExportSession writes the session as reference JSONL to w, as the server streams it
// (BlobRefs(): with blob references instead of bytes).
func (c *Client) ExportSession(ctx context.Context, id string, w io.Writer, opts ...ReadOption) error {
	ctx, cancel := context.WithCancel(c.ctx(ctx))
	defer cancel()
	stream, err := c.Raw.ExportSession(ctx, &pb.ExportSessionRequest{SessionId: id, BlobRefs: readOptions(opts).blobRefs})
	if err != nil {
		return AsError(err)
	}
	for {
		res, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return AsError(err)
		}
		if _, err := w.Write(res.GetChunk()); err != nil {
			return err
		}
	}
}

// ImportOptions are ImportSession's options: SessionID "" = the file's own id.
type ImportOptions struct {
	SessionID    string
	Labels       map[string]string
	Strict       bool
	AllowSeqGaps bool
	PairingGuard bool
}

// importChunk is the size of each streamed part of an import.
const importChunk = 64 << 10

// ImportSession streams reference JSONL from r into a new session (atomic: a refused file
// leaves no session) and returns it with the bytes of an uncommitted final line left out.
func (c *Client) ImportSession(ctx context.Context, r io.Reader, o ImportOptions) (*pb.Session, uint64, error) {
	ctx, cancel := context.WithCancel(c.ctx(ctx))
	defer cancel()
	stream, err := c.Raw.ImportSession(ctx)
	if err != nil {
		return nil, 0, AsError(err)
	}
	opts := &pb.ImportOptions{SessionId: o.SessionID, Labels: o.Labels, Strict: o.Strict, AllowSeqGaps: o.AllowSeqGaps, PairingGuard: o.PairingGuard}
	if err := stream.Send(&pb.ImportSessionRequest{Part: &pb.ImportSessionRequest_Options{Options: opts}}); err != nil {
		return c.importFailed(stream, err)
	}
	buf := make([]byte, importChunk)
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			chunk := append([]byte(nil), buf[:n]...)
			if err := stream.Send(&pb.ImportSessionRequest{Part: &pb.ImportSessionRequest_Chunk{Chunk: chunk}}); err != nil {
				return c.importFailed(stream, err)
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return nil, 0, rerr
		}
	}
	res, err := stream.CloseAndRecv()
	if err != nil {
		return nil, 0, AsError(err)
	}
	return res.GetSession(), res.GetUncommittedTailBytes(), nil
}

// importFailed: a Send that fails with io.EOF means the server ended the call; its status comes
// from CloseAndRecv.
func (c *Client) importFailed(stream pb.SessionService_ImportSessionClient, err error) (*pb.Session, uint64, error) {
	if errors.Is(err, io.EOF) {
		_, err = stream.CloseAndRecv()
	}
	return nil, 0, AsError(err)
}
