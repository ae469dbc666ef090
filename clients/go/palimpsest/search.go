package palimpsest

import (
	"context"
	"sort"
	"time"

	pb "palimpsest.dev/go/gen/palimpsest/v1"
)

// SearchOptions are SearchEvents' filters and order (issue #40, docs/search.md); the zero value
// filters nothing. Labels must all match; a zero StartTime / EndTime is unset (EndTime is
// excluded); Order is pb.SearchOrder_SEARCH_ORDER_NEWEST (the default) or _SCORE; PageSize 0 =
// the server's default (20).
type SearchOptions struct {
	Labels          map[string]string
	SessionIDs      []string
	EventTypes      []string
	StartTime       time.Time
	EndTime         time.Time
	ToolName        string
	SurfaceOnly     bool
	IncludeShadowed bool
	Order           pb.SearchOrder
	PageSize        uint32
}

func (o SearchOptions) request(query, pageToken string) *pb.SearchEventsRequest {
	req := &pb.SearchEventsRequest{
		Query: query, PageSize: o.PageSize, PageToken: pageToken, LabelSelector: o.Labels, SessionIds: o.SessionIDs,
		EventTypes: o.EventTypes, ToolName: o.ToolName, SurfaceOnly: o.SurfaceOnly, IncludeShadowed: o.IncludeShadowed, Order: o.Order,
	}
	if !o.StartTime.IsZero() {
		ms := o.StartTime.UnixMilli()
		req.StartTime = &ms
	}
	if !o.EndTime.IsZero() {
		ms := o.EndTime.UnixMilli()
		req.EndTime = &ms
	}
	return req
}

// SearchPage answers one page of a search: its hits and the next page's token ("" on the last
// page). A malformed query is an *Error INVALID_ARGUMENT / SEARCH_QUERY_INVALID whose
// Metadata["position"] is the 0-based offset in the query.
func (c *Client) SearchPage(ctx context.Context, query string, o SearchOptions, pageToken string) ([]*pb.SearchHit, string, error) {
	res, err := c.Raw.SearchEvents(c.ctx(ctx), o.request(query, pageToken))
	if err != nil {
		return nil, "", AsError(err)
	}
	return res.GetHits(), res.GetNextPageToken(), nil
}

// Search iterates over every event of the caller's sessions matching query (words, "phrases",
// -exclusions, prefix*, type:, tool:, label:k=v, session:), newest first or best first, asking
// for the next page only when the caller reads past the current one:
//
//	it := c.Search(ctx, `"invoice 4711" tool:deploy`, palimpsest.SearchOptions{})
//	for it.Next() {
//		h := it.Hit()
//		fmt.Println(h.GetSessionId(), h.GetSeq(), h.GetSnippet())
//	}
//	if err := it.Err(); err != nil { ... }
func (c *Client) Search(ctx context.Context, query string, o SearchOptions) *SearchIterator {
	return &SearchIterator{c: c, ctx: ctx, query: query, o: o}
}

// SearchIterator walks the hits of a search across pages (like bufio.Scanner: Next, Hit, Err).
type SearchIterator struct {
	c     *Client
	ctx   context.Context
	query string
	o     SearchOptions
	page  []*pb.SearchHit
	token string
	hit   *pb.SearchHit
	err   error
	begun bool
}

// Next advances to the next hit, fetching the next page when the current one is used up; false
// at the end or on an error (see Err).
func (it *SearchIterator) Next() bool {
	for len(it.page) == 0 {
		if it.err != nil || (it.begun && it.token == "") {
			it.hit = nil
			return false
		}
		it.begun = true
		it.page, it.token, it.err = it.c.SearchPage(it.ctx, it.query, it.o, it.token)
	}
	it.hit, it.page = it.page[0], it.page[1:]
	return true
}

// Hit is the current hit (after a Next that returned true).
func (it *SearchIterator) Hit() *pb.SearchHit { return it.hit }

// Err is the error that ended the iteration (nil at a normal end); a decoded *Error.
func (it *SearchIterator) Err() error { return it.err }

// SnippetPart is a piece of a snippet: matched text or the text between matches.
type SnippetPart struct {
	Text  string
	Match bool
}

// SnippetParts cuts the hit's snippet at its matches, in order. The matches are offsets in
// Unicode code points (runes), not bytes; ranges out of order, overlapping or past the end are
// clamped, so the parts always join back to the snippet.
func SnippetParts(h *pb.SearchHit) []SnippetPart {
	runes := []rune(h.GetSnippet())
	ms := append([]*pb.SnippetRange(nil), h.GetMatches()...)
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].GetStart() < ms[j].GetStart() })
	clamp := func(v, lo int) int {
		if v > len(runes) {
			v = len(runes)
		}
		if v < lo {
			v = lo
		}
		return v
	}
	var out []SnippetPart
	at := 0
	for _, m := range ms {
		start := clamp(int(m.GetStart()), at)
		end := clamp(int(m.GetEnd()), start)
		if start > at {
			out = append(out, SnippetPart{Text: string(runes[at:start])})
		}
		if end > start {
			out = append(out, SnippetPart{Text: string(runes[start:end]), Match: true})
		}
		at = end
	}
	if at < len(runes) {
		out = append(out, SnippetPart{Text: string(runes[at:])})
	}
	return out
}
