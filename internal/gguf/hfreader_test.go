package gguf

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/rehearse/rehearse/internal/npmtest"
	"github.com/x448/float16"
)

// hfGGUF is the independent reader the writer is checked against, pinned.
const hfGGUF = "@huggingface/gguf@0.4.6"

// hfReaderPrefix installs the reader with npm into the cache folder once and
// returns its npm prefix.
func hfReaderPrefix(t *testing.T) string {
	t.Helper()
	return npmtest.Prefix(t, hfGGUF, "the GGUF writer's check against "+hfGGUF)
}

// hfRead is what the reader makes of a file.
type hfRead struct {
	Metadata    map[string]json.RawMessage `json:"metadata"`
	Types       map[string][]int           `json:"types"`
	TensorInfos []struct {
		Name   string   `json:"name"`
		Shape  []string `json:"shape"`
		Dtype  int      `json:"dtype"`
		Offset string   `json:"offset"`
	} `json:"tensorInfos"`
	TensorDataOffset string `json:"tensorDataOffset"`
}

// TestIndependentReaderReadsWhatWasWritten writes a model and checks every
// metadata pair (value and type), every tensor info and a few data values
// as @huggingface/gguf reads them.
func TestIndependentReaderReadsWhatWasWritten(t *testing.T) {
	prefix := hfReaderPrefix(t)
	s := tiny
	s.Tied, s.Vocab = false, 151936
	m := newModel(t, s, 9)
	path := filepath.Join(t.TempDir(), "m.gguf")
	size, err := m.WriteFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("node", filepath.Join("testdata", "hfgguf.mjs"), prefix, path).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var got hfRead
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	checkMetadata(t, m.Metadata(), got)
	dataStart := checkTensorInfos(t, m.Tensors(), got, size)
	checkData(t, path, dataStart, m, got)
}

// metadataType is the GGUF value type (and element type) each Go value is
// written as.
func metadataType(v any) []int {
	switch v.(type) {
	case uint32:
		return []int{typeUint32}
	case float32:
		return []int{typeFloat32}
	case bool:
		return []int{typeBool}
	case string:
		return []int{typeString}
	case []string:
		return []int{typeArray, typeString}
	case []int32:
		return []int{typeArray, typeInt32}
	}
	return nil
}

func checkMetadata(t *testing.T, kvs []KV, got hfRead) {
	t.Helper()
	if string(got.Metadata["version"]) != "3" || string(got.Metadata["kv_count"]) != strconv.Quote(strconv.Itoa(len(kvs))) {
		t.Errorf("version %s, kv_count %s; want 3 and %d", got.Metadata["version"], got.Metadata["kv_count"], len(kvs))
	}
	for _, kv := range kvs {
		raw, ok := got.Metadata[kv.Key]
		if !ok {
			t.Errorf("%s: missing", kv.Key)
			continue
		}
		if !reflect.DeepEqual(got.Types[kv.Key], metadataType(kv.Value)) {
			t.Errorf("%s: type %v; want %v", kv.Key, got.Types[kv.Key], metadataType(kv.Value))
		}
		want := kv.Value
		if f, ok := want.(float32); ok {
			want = float64(f) // the reader widens a float32 exactly
		}
		wantJSON, _ := json.Marshal(want)
		var a, b any
		if json.Unmarshal(raw, &a) != nil || json.Unmarshal(wantJSON, &b) != nil || !reflect.DeepEqual(a, b) {
			t.Errorf("%s: read %.200s; wrote %.200s", kv.Key, raw, wantJSON)
		}
	}
}

// checkTensorInfos compares names, shapes, types and offsets, checks that
// the data ends where the file does, and returns where the data starts.
func checkTensorInfos(t *testing.T, tensors []Tensor, got hfRead, size int64) int64 {
	t.Helper()
	if len(got.TensorInfos) != len(tensors) {
		t.Fatalf("%d tensors read; wrote %d", len(got.TensorInfos), len(tensors))
	}
	var offset int64
	for i, ts := range tensors {
		g := got.TensorInfos[i]
		shape := make([]string, len(ts.Dims))
		for j, d := range ts.Dims {
			shape[j] = strconv.FormatUint(d, 10)
		}
		if g.Name != ts.Name || !reflect.DeepEqual(g.Shape, shape) || g.Dtype != int(ts.Type) || g.Offset != strconv.FormatInt(offset, 10) {
			t.Errorf("tensor %d read as %+v; wrote %s %v %v at %d", i, g, ts.Name, shape, ts.Type, offset)
		}
		offset += ts.Bytes() + padding(ts.Bytes())
	}
	start, err := strconv.ParseInt(got.TensorDataOffset, 10, 64)
	if err != nil || start%Alignment != 0 || start+offset != size {
		t.Fatalf("data starts at %s and is %d bytes; the file is %d", got.TensorDataOffset, offset, size)
	}
	return start
}

// checkData reads values the construction fixes at the offsets the reader
// gave: a word's and a non-word's output weight (F16), attn_v.bias[0] and
// output_norm (F32).
func checkData(t *testing.T, path string, start int64, m *Model, got hfRead) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	at := func(name string, element int64) float32 {
		for i, info := range got.TensorInfos {
			if info.Name != name {
				continue
			}
			off, _ := strconv.ParseInt(info.Offset, 10, 64)
			size := m.Tensors()[i].Type.Size()
			buf := make([]byte, size)
			if _, err := f.ReadAt(buf, start+off+element*size); err != nil {
				t.Fatal(err)
			}
			if size == 2 {
				return float16.Frombits(binary.LittleEndian.Uint16(buf)).Float32()
			}
			return math.Float32frombits(binary.LittleEndian.Uint32(buf))
		}
		t.Fatalf("no tensor %s", name)
		return 0
	}
	n := int64(m.Shape.Embd)
	hello, comma := int64(23811), int64(11) // " hello", ","
	if !m.words[hello] || m.words[comma] {
		t.Fatalf("ids %d and %d are not a word and a non-word", hello, comma)
	}
	for _, c := range []struct {
		name    string
		element int64
		want    float32
	}{
		{"output.weight", hello * n, wordMargin}, {"output.weight", comma * n, -wordMargin},
		{"blk.1.attn_v.bias", 0, valueConst}, {"output_norm.weight", n - 1, 1},
	} {
		if v := at(c.name, c.element); v != c.want {
			t.Errorf("%s element %d = %v; want %v", c.name, c.element, v, c.want)
		}
	}
}
