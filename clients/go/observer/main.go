// Command observer follows a Palimpsest session's surface the way a UI or an
// indexer would: it subscribes to SubscribeSurface, applies every delta to a
// local copy of the surface, resumes from its last cursor when the stream
// breaks, and finally checks its copy against GetSurface.
//
// To prove resumption it cancels its own stream after -drop-after messages
// (each time), then subscribes again with after_seq = the last cursor.
// It stops once its cursor reaches -until-seq, then prints a JSON summary on
// stdout. Progress lines go to stderr ("subscribed", "resumed ...").
//
// Generated code: clients/run.sh go generates palimpsest/v1 into a GOPATH and
// builds this program offline against Debian's Go packages.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	palimpsestv1 "palimpsest.dev/go/gen/palimpsest/v1"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// surface is the observer's local copy: ordered seqs of model-visible events.
type surface []uint64

func (s surface) indexOf(seq uint64) int {
	for i, v := range s {
		if v == seq {
			return i
		}
	}
	return -1
}

// apply folds one delta into the surface. Replace endpoints are matched by
// position on the surface (start may be numerically greater than end after
// nested replaces), exactly as the server does.
func (s surface) apply(msg *palimpsestv1.SubscribeSurfaceResponse) (surface, error) {
	switch k := msg.Kind.(type) {
	case *palimpsestv1.SubscribeSurfaceResponse_Snapshot:
		return append(surface(nil), k.Snapshot.GetSeqs()...), nil
	case *palimpsestv1.SubscribeSurfaceResponse_Append:
		return append(s, k.Append.GetSeq()), nil
	case *palimpsestv1.SubscribeSurfaceResponse_Replace:
		r := k.Replace
		i, j := s.indexOf(r.GetStart()), s.indexOf(r.GetEnd())
		if i < 0 || j < 0 || i > j {
			return s, fmt.Errorf("replace %d..%d -> %d does not fit local surface %v", r.GetStart(), r.GetEnd(), r.GetSeq(), s)
		}
		shadowed := s[i : j+1]
		if want := r.GetShadowedSeqs(); len(want) != len(shadowed) || !equal(want, shadowed) {
			return s, fmt.Errorf("replace shadows %v locally, server says %v", shadowed, want)
		}
		out := make(surface, 0, len(s)-len(shadowed)+1)
		out = append(out, s[:i]...)
		out = append(out, r.GetSeq())
		return append(out, s[j+1:]...), nil
	default: // checkpoint, caught_up, heartbeat: the surface is unchanged.
		return s, nil
	}
}

func equal(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

type summary struct {
	SessionID        string   `json:"sessionId"`
	Surface          []uint64 `json:"surface"`
	ServerSurface    []uint64 `json:"serverSurface"`
	Equal            bool     `json:"equal"`
	Cursor           *uint64  `json:"cursor"`
	Subscriptions    int      `json:"subscriptions"`
	ResumedFrom      []uint64 `json:"resumedFrom"`
	Messages         int      `json:"messages"`
	Appends          int      `json:"appends"`
	Replaces         int      `json:"replaces"`
	ReplacedSeqs     []uint64 `json:"replacedSeqs"`
	Checkpoints      int      `json:"checkpoints"`
	CaughtUps        int      `json:"caughtUps"`
	Heartbeats       int      `json:"heartbeats"`
	ReplaceGen       uint64   `json:"replaceGeneration"`
	ServerHeadSeq    *uint64  `json:"serverHeadSeq"`
	DeltaEventsTyped int      `json:"deltaEventsTyped"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "server address host:port")
	sessionID := flag.String("session", "", "session id to follow (required)")
	untilSeq := flag.Int64("until-seq", -1, "stop once the cursor reaches this seq (required)")
	dropAfter := flag.Int("drop-after", 0, "cancel the stream after this many messages, then resume (0 = never)")
	timeout := flag.Duration("timeout", 30*time.Second, "give up after this long")
	flag.Parse()
	if *sessionID == "" || *untilSeq < 0 {
		fmt.Fprintln(os.Stderr, "usage: observer -addr HOST:PORT -session ID -until-seq N [-drop-after K]")
		os.Exit(2)
	}
	if err := run(*addr, *sessionID, uint64(*untilSeq), *dropAfter, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "observer:", err)
		os.Exit(1)
	}
}

func run(addr, sessionID string, untilSeq uint64, dropAfter int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := grpc.DialContext(ctx, addr, grpc.WithInsecure(), grpc.WithBlock())
	if err != nil {
		return fmt.Errorf("dial %s: %w", addr, err)
	}
	defer conn.Close()
	client := palimpsestv1.NewSessionServiceClient(conn)

	sum := summary{SessionID: sessionID, ResumedFrom: []uint64{}, ReplacedSeqs: []uint64{}}
	var local surface
	var cursor *uint64
	done := false
	for !done {
		req := &palimpsestv1.SubscribeSurfaceRequest{SessionId: sessionID, AfterSeq: cursor, DataFormat: palimpsestv1.DataFormat_DATA_FORMAT_TYPED}
		if cursor != nil {
			sum.ResumedFrom = append(sum.ResumedFrom, *cursor)
			fmt.Fprintf(os.Stderr, "resumed after_seq=%d\n", *cursor)
		}
		sum.Subscriptions++
		streamCtx, streamCancel := context.WithCancel(ctx)
		stream, err := client.SubscribeSurface(streamCtx, req)
		if err != nil {
			streamCancel()
			return fmt.Errorf("subscribe: %w", err)
		}
		received := 0
		for {
			msg, err := stream.Recv()
			if err != nil {
				streamCancel()
				// Our own drop, or a server going away (SERVER_SHUTDOWN is UNAVAILABLE):
				// resume from the last cursor. Anything else is fatal.
				if code := status.Code(err); code == codes.Canceled || code == codes.Unavailable {
					if ctx.Err() != nil {
						return fmt.Errorf("timed out at cursor %v: %w", cursor, ctx.Err())
					}
					break
				}
				if errors.Is(err, io.EOF) {
					return errors.New("stream ended unexpectedly")
				}
				return fmt.Errorf("recv: %w", err)
			}
			received++
			sum.Messages++
			if local, err = local.apply(msg); err != nil {
				streamCancel()
				return err
			}
			switch k := msg.Kind.(type) {
			case *palimpsestv1.SubscribeSurfaceResponse_Append:
				sum.Appends++
			case *palimpsestv1.SubscribeSurfaceResponse_Replace:
				sum.Replaces++
				sum.ReplacedSeqs = append(sum.ReplacedSeqs, k.Replace.GetSeq())
			case *palimpsestv1.SubscribeSurfaceResponse_Checkpoint:
				sum.Checkpoints++
			case *palimpsestv1.SubscribeSurfaceResponse_CaughtUp:
				sum.CaughtUps++
				if sum.CaughtUps == 1 {
					fmt.Fprintln(os.Stderr, "subscribed")
				}
			case *palimpsestv1.SubscribeSurfaceResponse_Heartbeat:
				sum.Heartbeats++
			}
			if ev := msg.GetEvent(); ev != nil && ev.GetData().GetJson() == "" {
				sum.DeltaEventsTyped++
			}
			if msg.Cursor != nil {
				c := msg.GetCursor()
				cursor = &c
			}
			if cursor != nil && *cursor >= untilSeq {
				streamCancel()
				done = true
				break
			}
			if dropAfter > 0 && received >= dropAfter {
				// Simulate a dropped connection: whatever is still in flight is lost, and the
				// next subscription resumes after the last cursor we applied.
				streamCancel()
				break
			}
		}
	}

	sum.Surface = append([]uint64{}, local...)
	sum.Cursor = cursor
	got, err := client.GetSurface(ctx, &palimpsestv1.GetSurfaceRequest{SessionId: sessionID})
	if err != nil {
		return fmt.Errorf("get surface: %w", err)
	}
	sum.ServerSurface = append([]uint64{}, got.GetSeqs()...)
	sum.ReplaceGen = got.GetReplaceGeneration()
	sum.ServerHeadSeq = got.HeadSeq
	sum.Equal = equal(sum.Surface, sum.ServerSurface) && got.HeadSeq != nil && *got.HeadSeq == *cursor
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(sum); err != nil {
		return err
	}
	if !sum.Equal {
		return fmt.Errorf("local surface %v (cursor %v) != server surface %v (head %v)", sum.Surface, *cursor, sum.ServerSurface, got.HeadSeq)
	}
	return nil
}
