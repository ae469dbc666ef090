package palimpsest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	pb "palimpsest.dev/go/gen/palimpsest/v1"
)

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7919) + seed
	}
	return b
}

func imageData(t *testing.T, e *pb.SessionEvent) any {
	t.Helper()
	var v struct {
		Content []struct {
			Attachment struct {
				Data any `json:"data"`
			} `json:"attachment"`
		} `json:"content"`
	}
	if err := json.Unmarshal([]byte(e.GetData().GetJson()), &v); err != nil || len(v.Content) == 0 {
		t.Fatalf("event data %q: %v", e.GetData().GetJson(), err)
	}
	return v.Content[len(v.Content)-1].Attachment.Data
}

func TestBlobRefsAndGetBlob(t *testing.T) {
	ctx := context.Background()
	c := dial(t, addr(t))
	id := sid()
	png := pattern(300*1024, 1)
	digest := BlobDigest(png)
	must[*pb.Session](t)(c.CreateSession(ctx, id, nil))
	must[[]int64](t)(c.Append(ctx, id, []*pb.EventInput{UserBlocks([]Block{Image(png, "image/png")}, "", nil, Placement{})}, AppendOptions{}))
	full := must[[]*pb.SessionEvent](t)(c.Events(ctx, id, EventsOptions{}))
	if got := imageData(t, full[0]); got != Image(png, "image/png")["attachment"].(map[string]any)["data"] {
		t.Fatalf("without blob_refs the bytes come back as appended")
	}
	refs := must[[]*pb.SessionEvent](t)(c.Events(ctx, id, EventsOptions{BlobRefs: true}))
	want := map[string]any{"$blob": digest, "bytes": float64(len(png)), "mediaType": "image/png", "encoding": "base64"}
	if got := imageData(t, refs[0]); !reflect.DeepEqual(got, want) {
		t.Fatalf("reference %v, want %v", got, want)
	}
	if got := must[[]byte](t)(c.GetBlob(ctx, digest, 0)); !bytes.Equal(got, png) {
		t.Fatalf("GetBlob: %d bytes", len(got))
	}
	if got := must[[]byte](t)(c.GetBlob(ctx, digest, int64(len(png)-1000))); !bytes.Equal(got, png[len(png)-1000:]) {
		t.Fatalf("GetBlob from an offset: %d bytes", len(got))
	}
	if _, err := c.GetBlob(ctx, "sha256:"+string(bytes.Repeat([]byte("0"), 64)), 0); asErr(t, err).Reason != "BLOB_NOT_FOUND" {
		t.Fatalf("missing blob: %v", err)
	}
	if _, err := c.GetBlob(ctx, digest, int64(len(png)+1)); asErr(t, err).Reason != "BLOB_OFFSET_OUT_OF_RANGE" {
		t.Fatalf("past the end: %v", err)
	}
}

func TestBlobRefsOnMessagesExportAndSubscriptions(t *testing.T) {
	ctx := context.Background()
	c := dial(t, addr(t))
	id := sid()
	png := pattern(120*1024, 3)
	b64 := Image(png, "image/png")["attachment"].(map[string]any)["data"].(string)
	ref := map[string]any{"$blob": BlobDigest(png), "bytes": float64(len(png)), "mediaType": "image/png", "encoding": "base64"}
	// As the server writes it (Go's json.Marshal of a map, used on the decoded messages below, sorts the keys).
	refText := string(must[[]byte](t)(json.Marshal(ref)))
	refWire := fmt.Sprintf(`{"$blob":%q,"bytes":%d,"mediaType":"image/png","encoding":"base64"}`, BlobDigest(png), len(png))
	must[*pb.Session](t)(c.CreateSession(ctx, id, nil))
	must[[]int64](t)(c.Append(ctx, id, []*pb.EventInput{UserBlocks([]Block{Image(png, "image/png")}, "", nil, Placement{})}, AppendOptions{}))
	text := func(v any) string { return string(must[[]byte](t)(json.Marshal(v))) }
	if plain := text(must[[]map[string]any](t)(c.Messages(ctx, id, false))); !bytes.Contains([]byte(plain), []byte(b64)) {
		t.Fatalf("Messages without BlobRefs: no bytes")
	}
	for _, opts := range [][]ReadOption{{BlobRefs()}, {BlobRefs(), Format("anthropic")}} {
		got := text(must[[]map[string]any](t)(c.Messages(ctx, id, false, opts...)))
		if !bytes.Contains([]byte(got), []byte(refText)) || bytes.Contains([]byte(got), []byte(b64)) {
			t.Fatalf("Messages with BlobRefs: %.300s", got)
		}
	}
	var full, light bytes.Buffer
	if err := c.ExportSession(ctx, id, &full); err != nil || !bytes.Contains(full.Bytes(), []byte(b64)) {
		t.Fatalf("export: %v", err)
	}
	if err := c.ExportSession(ctx, id, &light, BlobRefs()); err != nil || !bytes.Contains(light.Bytes(), []byte(refWire)) || bytes.Contains(light.Bytes(), []byte(b64)) {
		t.Fatalf("export with BlobRefs: %v", err)
	}
	for _, blobRefs := range []bool{false, true} {
		sub := c.SubscribeSurface(ctx, id, SubscribeOptions{IncludeMessages: true, BlobRefs: blobRefs})
		var d Delta
		for d.Op != "append" {
			d = must[Delta](t)(sub.Next())
		}
		sub.Close()
		got := imageData(t, d.Event)
		if blobRefs && !reflect.DeepEqual(got, ref) || !blobRefs && got != b64 {
			t.Fatalf("SubscribeSurface BlobRefs=%v: %.200v", blobRefs, got)
		}
		if m := text(d.Message); blobRefs != bytes.Contains([]byte(m), []byte(refText)) {
			t.Fatalf("SubscribeSurface BlobRefs=%v: message %.300s", blobRefs, m)
		}
	}
}

func TestAnImageSentOnceIsReferencedByDigest(t *testing.T) {
	ctx := context.Background()
	c := dial(t, addr(t))
	id := sid()
	png := pattern(200*1024, 2)
	must[*pb.Session](t)(c.CreateSession(ctx, id, nil))
	must[[]int64](t)(c.Append(ctx, id, []*pb.EventInput{UserBlocks([]Block{Image(png, "image/png")}, "", nil, Placement{})}, AppendOptions{}))
	must[[]int64](t)(c.Append(ctx, id, []*pb.EventInput{UserBlocks([]Block{Text("again"), ImageRef(BlobDigest(png), "image/png")}, "", nil, Placement{})}, AppendOptions{}))
	events := must[[]*pb.SessionEvent](t)(c.Events(ctx, id, EventsOptions{}))
	if got := imageData(t, events[1]); got != imageData(t, events[0]) {
		t.Fatalf("the referenced image was not stored as its bytes")
	}
	_, err := c.Append(ctx, id, []*pb.EventInput{UserBlocks([]Block{ImageRef(BlobDigest([]byte("never sent")), "image/png")}, "", nil, Placement{})}, AppendOptions{})
	if asErr(t, err).Reason != "BLOB_NOT_FOUND" {
		t.Fatalf("unknown digest: %v", err)
	}
	if n := len(must[[]*pb.SessionEvent](t)(c.Events(ctx, id, EventsOptions{}))); n != 2 {
		t.Fatalf("%d events after a refused append, want 2", n)
	}
}

func TestGetBlobResumesAfterADroppedConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := startProxy(t, addr(t))
	c := dial(t, p.ln.Addr().String())
	id := sid()
	png := make([]byte, 2*1024*1024+5)
	if _, err := rand.Read(png); err != nil {
		t.Fatal(err)
	}
	must[*pb.Session](t)(c.CreateSession(ctx, id, nil))
	must[[]int64](t)(c.Append(ctx, id, []*pb.EventInput{UserBlocks([]Block{Image(png, "image/png")}, "", nil, Placement{})}, AppendOptions{}))
	var got []byte
	err := c.BlobChunks(ctx, BlobDigest(png), 0, func(chunk []byte) error {
		if len(got) == 0 && p.drop() < 1 {
			t.Fatal("no connection to cut")
		}
		got = append(got, chunk...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, png) {
		t.Fatalf("read %d bytes, want the %d of the blob", len(got), len(png))
	}
	// The read went on over a new connection, from the offset it had reached.
	if p.accepted.Load() < 2 {
		t.Fatalf("accepted %d connections: the stream was not cut", p.accepted.Load())
	}
}
