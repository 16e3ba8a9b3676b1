package redisproto

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestAppendCommand(t *testing.T) {
	got := string(AppendCommand(nil, "SET", "key:1", "x"))
	want := "*3\r\n$3\r\nSET\r\n$5\r\nkey:1\r\n$1\r\nx\r\n"
	if got != want {
		t.Errorf("AppendCommand = %q, want %q", got, want)
	}
	b := AppendArrayHeader(nil, 2)
	b = AppendBulk(b, "GET")
	b = AppendBulkBytes(b, []byte("k"))
	if string(b) != "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n" {
		t.Errorf("header + bulks = %q", b)
	}
}

func TestSkip(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		typ     byte
		n       int64
		wantErr string // "" none; "error" an Error reply; else a substring
		rest    string // what must be left unread
	}{
		{"ok", "+OK\r\nX", TypeSimple, 0, "", "X"},
		{"int", ":42\r\n", TypeInt, 42, "", ""},
		{"negative int", ":-7\r\n", TypeInt, -7, "", ""},
		{"bulk", "$1\r\nx\r\nX", TypeBulk, 1, "", "X"},
		{"empty bulk", "$0\r\n\r\n", TypeBulk, 0, "", ""},
		{"nil bulk", "$-1\r\nX", TypeBulk, -1, "", "X"},
		{"array", "*2\r\n$1\r\na\r\n:1\r\nX", TypeArray, 2, "", "X"},
		{"nil array", "*-1\r\n", TypeArray, -1, "", ""},
		{"error reply", "-OOM command not allowed\r\nX", TypeError, 0, "error", "X"},
		{"error inside array", "*2\r\n-ERR a\r\n+OK\r\nX", TypeArray, 2, "error", "X"},
		{"not resp", "hello\r\n", 0, 0, "protocol error", ""},
		{"bare newline", "+OK\n", 0, 0, "protocol error", ""},
		{"bad number", "$x1\r\n", TypeBulk, 0, "protocol error", ""},
		{"short bulk", "$5\r\nab", TypeBulk, 0, "EOF", ""},
		{"huge bulk", "$999999999999\r\n", TypeBulk, 0, "protocol error", ""},
		{"closed", "", 0, 0, "EOF", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := bufio.NewReader(strings.NewReader(tt.in))
			typ, n, err := Skip(r)
			checkErr(t, err, tt.wantErr)
			if tt.wantErr == "" || tt.wantErr == "error" {
				if typ != tt.typ || n != tt.n {
					t.Errorf("Skip = %q %d, want %q %d", typ, n, tt.typ, tt.n)
				}
				rest, _ := io.ReadAll(r)
				if string(rest) != tt.rest {
					t.Errorf("left %q unread, want %q", rest, tt.rest)
				}
			}
		})
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	var re Error
	switch {
	case want == "" && err != nil:
		t.Fatalf("error %v, want none", err)
	case want == "error" && !errors.As(err, &re):
		t.Fatalf("error %v, want an Error reply", err)
	case want != "" && want != "error" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Fatalf("error %v, want one containing %q", err, want)
	}
}

func TestRead(t *testing.T) {
	r := bufio.NewReader(strings.NewReader("$10\r\nhello\r\nyou\r\n*3\r\n:1\r\n$-1\r\n-ERR no\r\n+PONG\r\n-WRONGTYPE x\r\n"))
	rep, err := Read(r)
	if err != nil || rep.Str != "hello\r\nyou" {
		t.Fatalf("bulk with CRLF inside: %+v %v", rep, err)
	}
	rep, err = Read(r)
	if err != nil || rep.Type != TypeArray || len(rep.Elems) != 3 || rep.Elems[0].Int != 1 || !rep.Elems[1].Nil ||
		rep.Elems[2].Type != TypeError || rep.Elems[2].Str != "ERR no" {
		t.Fatalf("array: %+v %v", rep, err)
	}
	if rep, err = Read(r); err != nil || rep.Str != "PONG" {
		t.Fatalf("simple: %+v %v", rep, err)
	}
	_, err = Read(r)
	checkErr(t, err, "error")
	if err.Error() != "redis: WRONGTYPE x" {
		t.Errorf("error text %q", err)
	}
}

func TestParseInfo(t *testing.T) {
	got := ParseInfo("# Memory\r\nused_memory:123\r\nmaxmemory_policy:noeviction\r\n\r\n# Persistence\r\naof_enabled:1\r\n")
	want := map[string]string{"used_memory": "123", "maxmemory_policy": "noeviction", "aof_enabled": "1"}
	if len(got) != len(want) {
		t.Fatalf("ParseInfo = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func BenchmarkSkipPipeline(b *testing.B) {
	var in strings.Builder
	for i := 0; i < 30; i++ {
		if i%4 == 0 {
			in.WriteString("+OK\r\n")
		} else {
			in.WriteString("$1\r\nx\r\n")
		}
	}
	s := in.String()
	sr := strings.NewReader(s)
	r := bufio.NewReaderSize(sr, 64<<10)
	b.ReportAllocs()
	b.SetBytes(int64(len(s)))
	for i := 0; i < b.N; i++ {
		sr.Reset(s)
		r.Reset(sr)
		for j := 0; j < 30; j++ {
			if _, _, err := Skip(r); err != nil {
				b.Fatal(err)
			}
		}
	}
}
