package store

import (
	"context"
	"fmt"

	"github.com/nearnative/nearnative/internal/runid"
)

// AddRunNote implements Store.
func (s *sqlStore) AddRunNote(ctx context.Context, id runid.ID, n RunNote) error {
	switch n.Kind {
	case NoteDegraded, NoteSkipped, NoteWarning, NoteClient, NoteHosts:
	default:
		return fmt.Errorf("cannot store note of run %s: unknown kind %q", id, n.Kind)
	}
	if n.Text == "" {
		return fmt.Errorf("cannot store note of run %s: no text", id)
	}
	// One statement: a note already stored matches the NOT EXISTS and
	// inserts nothing. Two writers racing for a seq break the primary key,
	// which is the same as the note being there already for the loser only
	// when the notes are equal, so the loser retries once.
	query := s.q(`INSERT INTO run_notes (run_id, seq, kind, subject, text)
		SELECT ?, COALESCE((SELECT MAX(seq) FROM run_notes WHERE run_id = ?), 0) + 1, ?, ?, ?
		WHERE NOT EXISTS (SELECT 1 FROM run_notes WHERE run_id = ? AND kind = ? AND subject = ? AND text = ?)`)
	args := []any{string(id), string(id), n.Kind, n.Subject, n.Text, string(id), n.Kind, n.Subject, n.Text}
	return s.write(ctx, "storing a note of run "+string(id), func(ctx context.Context, _ bool) error {
		_, err := s.db.ExecContext(ctx, query, args...)
		if err != nil && s.d.classify(err) == uniqueViolation {
			_, err = s.db.ExecContext(ctx, query, args...)
		}
		if err != nil {
			switch s.d.classify(err) {
			case foreignKeyViolation:
				return fmt.Errorf("cannot store note: %w", noRunError(string(id)))
			}
			return fmt.Errorf("storing note of run %s: %w", id, err)
		}
		return nil
	})
}

// RunNotes implements Store.
func (s *sqlStore) RunNotes(ctx context.Context, id runid.ID) ([]RunNote, error) {
	rows, err := s.db.QueryContext(ctx, s.q(`SELECT kind, subject, text FROM run_notes WHERE run_id = ? ORDER BY seq`), string(id))
	if err != nil {
		return nil, fmt.Errorf("reading notes of run %s: %w", id, err)
	}
	defer rows.Close()
	var out []RunNote
	for rows.Next() {
		var n RunNote
		if err := rows.Scan(&n.Kind, &n.Subject, &n.Text); err != nil {
			return nil, fmt.Errorf("reading notes of run %s: %w", id, err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading notes of run %s: %w", id, err)
	}
	return out, nil
}
