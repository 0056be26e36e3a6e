package node_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	decisionHead  = regexp.MustCompile(`(?m)^## D(\d+)\. `)
	decisionState = regexp.MustCompile(`^\*\*Status:\*\* (accepted|superseded by D(\d+))[.;]`)
	indexRow      = regexp.MustCompile(`(?m)^\| [^|]+ \| ((?:D\d+, )*D\d+) \|$`)
)

// TestDecisionsAreInNumberOrderWithAStatus keeps docs/decisions.md a record
// a reader can navigate: entries in number order, each with a status line
// under its heading (a superseded entry names an entry that exists), and
// every entry listed once in the topic index at the top.
func TestDecisionsAreInNumberOrderWithAStatus(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "decisions.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	heads := decisionHead.FindAllStringSubmatchIndex(text, -1)
	if len(heads) == 0 {
		t.Fatal("no decision entries found")
	}
	numbers := map[int]bool{}
	superseding := map[int]int{}
	prev := 0
	for i, h := range heads {
		n, _ := strconv.Atoi(text[h[2]:h[3]])
		if n <= prev {
			t.Errorf("D%d comes after D%d: entries must be in number order", n, prev)
		}
		prev = n
		numbers[n] = true
		end := len(text)
		if i+1 < len(heads) {
			end = heads[i+1][0]
		}
		body := strings.TrimLeft(text[h[1]:end], " \t")
		_, body, _ = strings.Cut(body, "\n") // the rest of the heading line
		m := decisionState.FindStringSubmatch(strings.TrimLeft(body, "\n"))
		if m == nil {
			t.Errorf("D%d has no **Status:** line right under its heading", n)
			continue
		}
		if m[2] != "" {
			superseding[n], _ = strconv.Atoi(m[2])
		}
	}
	for n, by := range superseding {
		if !numbers[by] {
			t.Errorf("D%d is superseded by D%d, which is not an entry", n, by)
		}
	}
	indexed := map[int]int{}
	preamble := text[:heads[0][0]]
	for _, row := range indexRow.FindAllStringSubmatch(preamble, -1) {
		for _, d := range strings.Split(row[1], ", ") {
			n, _ := strconv.Atoi(strings.TrimPrefix(d, "D"))
			indexed[n]++
		}
	}
	for n := range numbers {
		if indexed[n] != 1 {
			t.Errorf("D%d appears %d times in the topic index, want once", n, indexed[n])
		}
	}
	for n := range indexed {
		if !numbers[n] {
			t.Errorf("the topic index names D%d, which is not an entry", n)
		}
	}
}

var backticked = regexp.MustCompile("`([A-Za-z0-9_.\\-/]+)`")

// cutSymbol splits "audit/transparency.Build" into the folder and the
// exported name; a file name such as "events/upcast.go" is not split.
func cutSymbol(p string) (dir string, ok bool) {
	slash := strings.LastIndex(p, "/")
	dot := strings.LastIndex(p, ".")
	if dot <= slash || dot == len(p)-1 || p[dot+1] < 'A' || p[dot+1] > 'Z' {
		return "", false
	}
	return p[:dot], true
}

// TestDocsNameFilesThatExist fails on a path in the docs (in backticks,
// under one of the repository's own top-level folders) that names no file
// or folder: the layout moves, and the docs must move with it.
func TestDocsNameFilesThatExist(t *testing.T) {
	root := repoRoot(t)
	tops := map[string]bool{}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			tops[e.Name()] = true
		}
	}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	more, _ := filepath.Glob(filepath.Join(root, "docs", "*", "*.md"))
	docs = append(append(docs, more...), filepath.Join(root, "README.md"))
	for _, doc := range docs {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, doc)
		for i, line := range strings.Split(string(raw), "\n") {
			for _, at := range backticked.FindAllStringSubmatchIndex(line, -1) {
				if before := line[:at[0]]; strings.HasSuffix(before, "was ") || strings.HasSuffix(before, "former ") {
					continue // a former name, kept for the record
				}
				p := strings.TrimRight(line[at[2]:at[3]], "/.,")
				if dir, ok := cutSymbol(p); ok {
					p = dir // pkg.Symbol names the package's folder
				}
				top, rest, ok := strings.Cut(p, "/")
				if !ok || rest == "" || !tops[top] {
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err != nil {
					t.Errorf("%s:%d names %s, which does not exist", rel, i+1, p)
				}
			}
		}
	}
}
