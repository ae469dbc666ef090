package palimpsest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	pb "palimpsest.dev/go/gen/palimpsest/v1"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Client is a connection to a Palimpsest server.
type Client struct {
	conn       *grpc.ClientConn
	Raw        pb.SessionServiceClient
	token      string
	propagator Propagator
}

type options struct {
	token       string
	creds       credentials.TransportCredentials
	retries     int
	dialOptions []grpc.DialOption
	propagator  Propagator
}

// Propagator writes the caller's trace context (W3C traceparent, tracestate)
// for ctx through set. With OpenTelemetry:
//
//	pal.WithPropagator(func(ctx context.Context, set func(key, value string)) {
//		carrier := propagation.MapCarrier{}
//		otel.GetTextMapPropagator().Inject(ctx, carrier)
//		for k, v := range carrier {
//			set(k, v)
//		}
//	})
type Propagator func(ctx context.Context, set func(key, value string))

// WithPropagator makes every call send the trace context p writes for the
// call's ctx, so the server's spans join the caller's trace. This package has
// no OpenTelemetry dependency; WithTraceparent is the explicit alternative.
func WithPropagator(p Propagator) Option { return func(o *options) { o.propagator = p } }

type traceparentKey struct{}

// WithTraceparent returns a ctx whose calls send this W3C traceparent
// ("00-<32 hex trace id>-<16 hex parent span id>-<2 hex flags>"), so the
// server's span of each call made with it is a child of that span. It wins
// over a WithPropagator's traceparent.
func WithTraceparent(ctx context.Context, traceparent string) context.Context {
	return context.WithValue(ctx, traceparentKey{}, traceparent)
}

// Option configures Dial.
type Option func(*options)

// WithToken sends a bearer token (refused in plaintext to a non-loopback address).
func WithToken(token string) Option { return func(o *options) { o.token = token } }

// WithTLS uses TLS with the given credentials (credentials.NewClientTLSFromFile, ...).
func WithTLS(c credentials.TransportCredentials) Option { return func(o *options) { o.creds = c } }

// WithRetries sets how many attempts a unary call makes on UNAVAILABLE (default 5; 1 = no retry).
func WithRetries(attempts int) Option { return func(o *options) { o.retries = attempts } }

// WithDialOptions adds grpc dial options.
func WithDialOptions(d ...grpc.DialOption) Option {
	return func(o *options) { o.dialOptions = append(o.dialOptions, d...) }
}

func isLoopback(host string) bool {
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// retry is the UNAVAILABLE policy of the other clients' service config: up to
// attempts tries, backoff 100 ms doubling to 2 s.
func retry(attempts int) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		backoff := 100 * time.Millisecond
		for attempt := 1; ; attempt++ {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if status.Code(err) != codes.Unavailable || attempt >= attempts {
				return err
			}
			select {
			case <-ctx.Done():
				return err
			case <-time.After(backoff):
			}
			if backoff *= 2; backoff > 2*time.Second {
				backoff = 2 * time.Second
			}
		}
	}
}

// Dial connects to address (HOST:PORT). The connection is lazy: the first call dials.
func Dial(address string, opts ...Option) (*Client, error) {
	o := options{retries: 5}
	for _, f := range opts {
		f(&o)
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("palimpsest: address %q is not HOST:PORT: %w", address, err)
	}
	if o.token != "" && o.creds == nil && !isLoopback(host) {
		return nil, fmt.Errorf("palimpsest: refusing to send a bearer token to %s without TLS; use WithTLS or a loopback address", address)
	}
	dial := []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1 << 30))}
	if o.creds != nil {
		dial = append(dial, grpc.WithTransportCredentials(o.creds))
	} else {
		dial = append(dial, grpc.WithInsecure())
	}
	if o.retries > 1 {
		dial = append(dial, grpc.WithUnaryInterceptor(retry(o.retries)))
	}
	dial = append(dial, o.dialOptions...)
	conn, err := grpc.Dial(address, dial...)
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn, Raw: pb.NewSessionServiceClient(conn), token: o.token, propagator: o.propagator}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

func (c *Client) ctx(ctx context.Context) context.Context {
	var kv []string
	if c.token != "" {
		kv = append(kv, "authorization", "Bearer "+c.token)
	}
	explicit, _ := ctx.Value(traceparentKey{}).(string)
	if c.propagator != nil {
		c.propagator(ctx, func(key, value string) {
			if key = strings.ToLower(key); (key == "traceparent" && explicit == "") || key == "tracestate" {
				kv = append(kv, key, value)
			}
		})
	}
	if explicit != "" {
		kv = append(kv, "traceparent", explicit)
	}
	if len(kv) == 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// CreateSession creates an empty session (id "" = a generated UUID); opts
// are WithPairingGuard, WithStrict.
func (c *Client) CreateSession(ctx context.Context, id string, labels map[string]string, opts ...SessionOption) (*pb.Session, error) {
	req := &pb.CreateSessionRequest{SessionId: id, Labels: labels}
	for _, o := range opts {
		o(req)
	}
	res, err := c.Raw.CreateSession(c.ctx(ctx), req)
	return res.GetSession(), AsError(err)
}

// GetSession returns the header, labels and counts.
func (c *Client) GetSession(ctx context.Context, id string) (*pb.Session, error) {
	res, err := c.Raw.GetSession(c.ctx(ctx), &pb.GetSessionRequest{SessionId: id})
	return res.GetSession(), AsError(err)
}

// Head is the seq of the last event (-1 for an empty log).
func (c *Client) Head(ctx context.Context, id string) (int64, error) {
	s, err := c.GetSession(ctx, id)
	if err != nil {
		return 0, err
	}
	if s.HeadSeq == nil {
		return -1, nil
	}
	return int64(s.GetHeadSeq()), nil
}

// DeleteSession deletes a session.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	_, err := c.Raw.DeleteSession(c.ctx(ctx), &pb.DeleteSessionRequest{SessionId: id})
	return AsError(err)
}

// AppendOptions guard an append: ExpectedLastSeq (nil = unguarded; -1 = the
// session must be empty) and IdempotencyKey ("" = a generated one). Message ids
// the builders left empty are derived from the key and the event's index
// (DerivedID): retry a failed append by rebuilding the same batch with the same
// key and the server answers with the stored seqs.
type AppendOptions struct {
	ExpectedLastSeq *int64
	IdempotencyKey  string
}

// Expect is a pointer for AppendOptions.ExpectedLastSeq.
func Expect(seq int64) *int64 { return &seq }

// Append appends events as one atomic batch and returns their seqs.
func (c *Client) Append(ctx context.Context, id string, events []*pb.EventInput, o AppendOptions) ([]int64, error) {
	key := o.IdempotencyKey
	if key == "" {
		key = newKey()
	}
	events, err := withIDs(key, events)
	if err != nil {
		return nil, err
	}
	res, err := c.Raw.AppendEvents(c.ctx(ctx), &pb.AppendEventsRequest{SessionId: id, Events: events, ExpectedLastSeq: o.ExpectedLastSeq, IdempotencyKey: key})
	return seqsIn(res.GetSeqs()), AsError(err)
}

// GetSurface returns the ordered seqs of the model-visible events (AsOf(seq):
// as they were right after that event).
func (c *Client) GetSurface(ctx context.Context, id string, opts ...ReadOption) ([]int64, error) {
	res, err := c.Raw.GetSurface(c.ctx(ctx), &pb.GetSurfaceRequest{SessionId: id, AsOfSeq: readOptions(opts).asOfSeq})
	return seqsIn(res.GetSeqs()), AsError(err)
}

// Messages returns the model history (transcript = what a human reads), each
// message as its JSON.
// AsOf(seq) returns them as they were right after that event; Format(name)
// returns the model history as that provider's request messages (see
// RenderedMessages).
func (c *Client) Messages(ctx context.Context, id string, transcript bool, opts ...ReadOption) ([]map[string]any, error) {
	if o := readOptions(opts); o.format != "" {
		if transcript {
			return nil, fmt.Errorf("palimpsest: Format renders the model history; the transcript has no provider format")
		}
		rendered, err := c.RenderedMessages(ctx, id, o.format, opts...)
		if err != nil {
			return nil, err
		}
		out := make([]map[string]any, len(rendered))
		for i, r := range rendered {
			out[i] = r.Message
		}
		return out, nil
	}
	view := pb.MessageView_MESSAGE_VIEW_MODEL_HISTORY
	if transcript {
		view = pb.MessageView_MESSAGE_VIEW_TRANSCRIPT
	}
	o := readOptions(opts)
	res, err := c.Raw.GetMessages(c.ctx(ctx), &pb.GetMessagesRequest{SessionId: id, View: view, AsOfSeq: o.asOfSeq, BlobRefs: o.blobRefs})
	if err != nil {
		return nil, AsError(err)
	}
	out := make([]map[string]any, 0, len(res.GetMessages()))
	for _, m := range res.GetMessages() {
		var v map[string]any
		if err := json.Unmarshal([]byte(m.GetMessageJson()), &v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Delta is one message of a surface subscription: Op is "snapshot" (Seqs),
// "append" (Seq, Event), "replace" (Start, End, Seq, Shadowed, Event) or a
// signal ("checkpoint", "caught_up", "heartbeat"). Cursor is nil before any event.
type Delta struct {
	Op         string
	Cursor     *int64
	Seq        int64
	Start, End int64
	Shadowed   []int64
	Seqs       []int64
	Event      *pb.SessionEvent
	Message    map[string]any
}

// SubscribeOptions: After = resume after this cursor (nil = from the start);
// Snapshot = start with the current surface; NoReconnect = return UNAVAILABLE
// instead of resuming; BlobRefs = event data and messages with blobbed values
// as their references (docs/blobs.md) instead of their bytes.
type SubscribeOptions struct {
	After           *int64
	Snapshot        bool
	IncludeMessages bool
	HeartbeatMs     uint32
	NoReconnect     bool
	MaxBackoff      time.Duration
	BlobRefs        bool
}

// Subscription follows a surface; Next resumes by itself after UNAVAILABLE.
type Subscription struct {
	c       *Client
	ctx     context.Context
	id      string
	o       SubscribeOptions
	cursor  *int64
	first   bool
	stream  pb.SessionService_SubscribeSurfaceClient
	cancel  context.CancelFunc
	backoff time.Duration
	// Subscriptions counts the streams opened (1 + the reconnects).
	Subscriptions int
}

// SubscribeSurface starts following a session's surface; cancel ctx (or call Close) to stop.
func (c *Client) SubscribeSurface(ctx context.Context, id string, o SubscribeOptions) *Subscription {
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 5 * time.Second
	}
	return &Subscription{c: c, ctx: ctx, id: id, o: o, cursor: o.After, first: true, backoff: 50 * time.Millisecond}
}

// Cursor is the last cursor delivered (nil before any event).
func (s *Subscription) Cursor() *int64 { return s.cursor }

// Close ends the current stream.
func (s *Subscription) Close() {
	if s.cancel != nil {
		s.cancel()
	}
}

func (s *Subscription) open() error {
	req := &pb.SubscribeSurfaceRequest{SessionId: s.id, IncludeMessages: s.o.IncludeMessages, HeartbeatIntervalMs: s.o.HeartbeatMs, BlobRefs: s.o.BlobRefs}
	if s.first && s.o.Snapshot {
		req.Snapshot = true
	} else if s.cursor != nil {
		after := seqOut(*s.cursor)
		req.AfterSeq = &after
	}
	s.first = false
	ctx, cancel := context.WithCancel(s.c.ctx(s.ctx))
	stream, err := s.c.Raw.SubscribeSurface(ctx, req)
	if err != nil {
		cancel()
		return err
	}
	s.stream, s.cancel = stream, cancel
	s.Subscriptions++
	return nil
}

// Next blocks until the next delta. It reconnects (with backoff) after
// UNAVAILABLE, resuming after the last cursor delivered; any other failure
// (NOT_FOUND when the session is deleted, ctx cancelled) is returned.
func (s *Subscription) Next() (Delta, error) {
	for {
		if s.stream == nil {
			if err := s.open(); err != nil {
				if e := s.retryable(err); e != nil {
					return Delta{}, e
				}
				continue
			}
		}
		res, err := s.stream.Recv()
		if err == nil {
			s.backoff = 50 * time.Millisecond
			d := toDelta(res)
			if d.Cursor != nil {
				s.cursor = d.Cursor
			}
			return d, nil
		}
		s.cancel()
		s.stream = nil
		if errors.Is(err, io.EOF) {
			return Delta{}, io.EOF
		}
		if e := s.retryable(err); e != nil {
			return Delta{}, e
		}
	}
}

// retryable waits out the backoff and returns nil when err is worth a reconnect.
func (s *Subscription) retryable(err error) error {
	if s.o.NoReconnect || status.Code(err) != codes.Unavailable || s.ctx.Err() != nil {
		return AsError(err)
	}
	select {
	case <-s.ctx.Done():
		return AsError(err)
	case <-time.After(s.backoff):
	}
	if s.backoff *= 2; s.backoff > s.o.MaxBackoff {
		s.backoff = s.o.MaxBackoff
	}
	return nil
}

func toDelta(res *pb.SubscribeSurfaceResponse) Delta {
	d := Delta{Event: res.GetEvent()}
	if res.Cursor != nil {
		c := int64(res.GetCursor())
		d.Cursor = &c
	}
	if m := res.GetMessage(); m != nil && m.GetMessageJson() != "" {
		_ = json.Unmarshal([]byte(m.GetMessageJson()), &d.Message)
	}
	switch k := res.Kind.(type) {
	case *pb.SubscribeSurfaceResponse_Snapshot:
		d.Op, d.Seqs = "snapshot", seqsIn(k.Snapshot.GetSeqs())
	case *pb.SubscribeSurfaceResponse_Append:
		d.Op, d.Seq = "append", int64(k.Append.GetSeq())
	case *pb.SubscribeSurfaceResponse_Replace:
		r := k.Replace
		d.Op, d.Seq, d.Start, d.End, d.Shadowed = "replace", int64(r.GetSeq()), int64(r.GetStart()), int64(r.GetEnd()), seqsIn(r.GetShadowedSeqs())
	case *pb.SubscribeSurfaceResponse_Checkpoint:
		d.Op = "checkpoint"
	case *pb.SubscribeSurfaceResponse_CaughtUp:
		d.Op = "caught_up"
	default:
		d.Op = "heartbeat"
	}
	return d
}
