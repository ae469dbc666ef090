package palimpsest

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"time"

	pb "palimpsest.dev/go/gen/palimpsest/v1"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// EventsOptions selects the events Events returns.
type EventsOptions struct {
	// After: only events after this seq (nil = from the start).
	After *int64
	// Types: only events of these types (none = all).
	Types []string
	// PageSize: events per ListEvents page (0 = the server's default).
	PageSize uint32
	// BlobRefs: blobbed values (images, large strings; docs/blobs.md) come as their
	// references {"$blob": "sha256:…", "bytes": N, "mediaType": …} (read them with
	// GetBlob) instead of their bytes.
	BlobRefs bool
}

// Events returns the session's events in seq order, paging through ListEvents.
func (c *Client) Events(ctx context.Context, id string, o EventsOptions) ([]*pb.SessionEvent, error) {
	req := &pb.ListEventsRequest{SessionId: id, Direction: pb.Direction_DIRECTION_FORWARD, PageSize: o.PageSize, Types: o.Types, BlobRefs: o.BlobRefs}
	if o.After != nil {
		from := seqOut(*o.After + 1)
		req.FromSeq = &from
	}
	var out []*pb.SessionEvent
	for {
		res, err := c.Raw.ListEvents(c.ctx(ctx), req)
		if err != nil {
			return out, AsError(err)
		}
		out = append(out, res.GetEvents()...)
		if res.GetNextPageToken() == "" {
			return out, nil
		}
		req = &pb.ListEventsRequest{SessionId: id, Direction: pb.Direction_DIRECTION_FORWARD, PageSize: o.PageSize, Types: o.Types, BlobRefs: o.BlobRefs, PageToken: res.GetNextPageToken()}
	}
}

// blobResumes is how many times in a row a blob read reopens a broken stream without progress.
const blobResumes = 5

// resumable reports whether a broken blob stream is worth reopening (the connection dropped,
// the server restarted), as opposed to an answer (NOT_FOUND, DATA_LOSS, ...).
func resumable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.Internal, codes.Unknown:
		return true
	}
	return false
}

// BlobChunks reads the tenant's blob digest from offset with GetBlob, calling fn with each
// chunk in order (fn must not keep the slice). A stream that breaks is opened again from the
// bytes already delivered, so fn sees every byte once; errors a retry cannot fix
// (BLOB_NOT_FOUND, BLOB_OFFSET_OUT_OF_RANGE, DATA_LOSS, ...) and fn's own are returned.
func (c *Client) BlobChunks(ctx context.Context, digest string, offset int64, fn func(chunk []byte) error) error {
	failures := 0
	for {
		err := func() error {
			stream, err := c.Raw.GetBlob(c.ctx(ctx), &pb.GetBlobRequest{Digest: digest, Offset: uint64(offset)})
			if err != nil {
				return err
			}
			for {
				res, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					return err
				}
				if len(res.GetData()) == 0 {
					continue
				}
				failures = 0
				offset += int64(len(res.GetData()))
				if err := fn(res.GetData()); err != nil {
					return &callbackError{err}
				}
			}
		}()
		var cb *callbackError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &cb):
			return cb.err
		case ctx.Err() != nil || !resumable(err) || failures >= blobResumes:
			return AsError(err)
		}
		failures++
		wait := time.Duration(50<<failures) * time.Millisecond
		if wait > time.Second {
			wait = time.Second
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }

// GetBlob returns the tenant's blob digest from offset (BlobChunks joined: a read cut short
// resumes from the bytes it has).
func (c *Client) GetBlob(ctx context.Context, digest string, offset int64) ([]byte, error) {
	var out []byte
	err := c.BlobChunks(ctx, digest, offset, func(chunk []byte) error {
		out = append(out, chunk...)
		return nil
	})
	return out, err
}

// BlobDigest is the digest a blob of data has on the server: "sha256:" and the SHA-256 of
// the bytes (for an image, of the image file itself).
func BlobDigest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Image is an image block carrying the image's bytes (as base64). A large one (serve
// --blob-min-bytes) is stored once per tenant as a blob; later events can send
// ImageRef(BlobDigest(data), ...) instead of the bytes again.
func Image(data []byte, mediaType string) Block {
	return Block{"type": "image", "attachment": map[string]any{"mimeType": mediaType, "data": base64.StdEncoding.EncodeToString(data)}}
}

// ImageRef is an image block that references a blob the tenant already stored (an image sent
// before with Image) by digest instead of carrying its bytes: the server stores the event
// exactly as if the bytes had been sent. A digest the tenant has no blob for is refused with
// BLOB_NOT_FOUND, nothing stored: send Image then.
func ImageRef(digest, mediaType string) Block {
	return Block{"type": "image", "attachment": map[string]any{"mimeType": mediaType, "data": map[string]any{"$blob": digest, "encoding": "base64"}}}
}

// UserBlocks is a user/message with content blocks (Text, Image, ImageRef, ...); source nil =
// {kind: user}; id "" leaves the id to Append (DerivedID).
func UserBlocks(blocks []Block, id string, source map[string]any, p Placement) *pb.EventInput {
	if source == nil {
		source = map[string]any{"kind": "user"}
	}
	return NewEvent("user/message", map[string]any{"id": id, "role": "user", "content": blocks, "source": source}, true, p)
}
