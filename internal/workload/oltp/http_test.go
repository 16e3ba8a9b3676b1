package oltp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHTTPErrors serves canned pages in the PHP pages' formats and checks
// how the client reads them: which are errors, with which text.
func TestHTTPErrors(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		want    string
		wantErr error
	}{
		{"order", 200, `<p>Thank you. Order <span class="orderid">12001</span> of 2 items</p>`, "", nil},
		{"rollback", 200, `<p class="rollback" data-sqlstate="DS001">insufficient stock for product 5: 0 in stock, 1 ordered</p>`,
			"POST /purchase.php: order rolled back: insufficient stock (insufficient stock for product 5", ErrRollback},
		{"deadlock", 503, `<p class="error" data-sqlstate="40P01">deadlock detected</p>`, "HTTP 503: deadlock (deadlock detected)", ErrDeadlock},
		{"database error", 500, `<p class="error" data-sqlstate="22023">purchase: 0 products</p>`, "HTTP 500: the page reports SQLSTATE 22023: purchase: 0 products", nil},
		{"error page with status 200", 200, `<p class="error" data-sqlstate="">Username/password incorrect</p>`, "HTTP 200: the page reports an error: Username/password incorrect", nil},
		{"server error without a mark", 502, `<html><body><h1>Bad Gateway</h1></body></html>`, "POST /purchase.php: HTTP 502: Bad Gateway", nil},
		{"page without an order id", 200, `<p>hello</p>`, "the page has no", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost || r.URL.Path != "/purchase.php" {
					t.Errorf("request %s %s", r.Method, r.URL.Path)
				}
				if err := r.ParseForm(); err != nil || r.PostForm.Get("totalamount") != "21.65" || len(r.PostForm["prod_id[]"]) != 2 {
					t.Errorf("form %v, %v", r.PostForm, err)
				}
				w.WriteHeader(tt.status)
				w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			s, err := NewHTTPShop(strings.TrimPrefix(srv.URL, "http://"), NewTransport(2, nil))
			if err != nil {
				t.Fatal(err)
			}
			id, err := s.Purchase(context.Background(), 7, 2000, 165, []Item{{1, 1}, {2, 2}})
			if tt.want == "" {
				if err != nil || id != 12001 {
					t.Errorf("Purchase = %d, %v", id, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Purchase error %v, want %q", err, tt.want)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Purchase error %v is not %v", err, tt.wantErr)
			}
			if tt.wantErr == nil && (errors.Is(err, ErrRollback) || errors.Is(err, ErrDeadlock)) {
				t.Errorf("Purchase error %v taken for a rollback or deadlock", err)
			}
		})
	}
	if _, err := NewHTTPShop("no-port", NewTransport(1, nil)); err == nil {
		t.Error("NewHTTPShop without a port: no error")
	}
}

func TestCents(t *testing.T) {
	for c, want := range map[int]string{0: "0.00", 5: "0.05", 1999: "19.99", 123456: "1234.56"} {
		if got := cents(c); got != want {
			t.Errorf("cents(%d) = %s", c, got)
		}
	}
}
