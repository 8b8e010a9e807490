package export

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/rehearse/rehearse/internal/bundle"
	"github.com/rehearse/rehearse/internal/contract"
)

// Columns are the record fields of the jsonl and csv formats, in the order
// of contract.Record: every field a record can carry, whether or not a
// given record carries it. A field added to contract.Record joins them.
func Columns() []string {
	t := reflect.TypeFor[contract.Record]()
	cols := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			cols = append(cols, name)
		}
	}
	return cols
}

// rowValues is each column's value of rec: its JSON value, null where
// the record does not carry the field.
func rowValues(rec contract.Record) ([]json.RawMessage, error) {
	data, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	cols := Columns()
	out := make([]json.RawMessage, len(cols))
	for i, c := range cols {
		v, ok := m[c]
		if !ok {
			v = json.RawMessage("null")
		}
		out[i] = v
	}
	return out, nil
}

// JSONL is the jsonl format: one JSON object per record, in results.json's
// order, with every column (null where a record lacks the field).
func JSONL(r *bundle.Results, _ Options) (Output, error) {
	cols := Columns()
	var b bytes.Buffer
	for i, rec := range r.Records {
		vals, err := rowValues(rec)
		if err != nil {
			return Output{}, fmt.Errorf("record %d: %w", i, err)
		}
		obj := make(object, len(cols))
		for j, c := range cols {
			obj[j] = field{c, vals[j]}
		}
		data, err := json.Marshal(obj)
		if err != nil {
			return Output{}, fmt.Errorf("record %d: %w", i, err)
		}
		b.Write(data)
		b.WriteByte('\n')
	}
	return Output{Data: b.Bytes(), Notes: []string{fmt.Sprintf("jsonl: %d records (every kind: recorded, warmup, mechanism_check), %d fields each; times are seconds from the release of the record's wave (waves[].started_at)", len(r.Records), len(cols))}}, nil
}

// CSV is the csv format: a header of Columns, then one row per record in
// results.json's order. Strings, numbers and booleans are written plainly,
// an absent field as an empty cell, an array (chunk_times_s) as its JSON.
func CSV(r *bundle.Results, _ Options) (Output, error) {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	if err := w.Write(Columns()); err != nil {
		return Output{}, err
	}
	for i, rec := range r.Records {
		vals, err := rowValues(rec)
		if err != nil {
			return Output{}, fmt.Errorf("record %d: %w", i, err)
		}
		row := make([]string, len(vals))
		for j, v := range vals {
			row[j] = cell(v)
		}
		if err := w.Write(row); err != nil {
			return Output{}, err
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return Output{}, err
	}
	return Output{Data: b.Bytes(), Notes: []string{fmt.Sprintf("csv: %d records (every kind), %d columns; chunk_times_s is a JSON array in its cell, an absent field an empty cell; times are seconds from the release of the record's wave", len(r.Records), len(Columns()))}}, nil
}

// cell is a JSON value as a CSV cell.
func cell(v json.RawMessage) string {
	s := string(v)
	switch {
	case s == "null":
		return ""
	case strings.HasPrefix(s, `"`):
		var str string
		if err := json.Unmarshal(v, &str); err == nil {
			return str
		}
	case s == "true" || s == "false":
		return s
	case strings.HasPrefix(s, "[") || strings.HasPrefix(s, "{"):
		return s
	}
	return s // a number, as JSON writes it
}
