package deploycheck

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Dockerfile is the part of a Dockerfile these checks read: its stages and
// their instructions, with line continuations joined and comments dropped.
type Dockerfile struct {
	Stages []Stage
}

// Stage is one FROM and what follows it.
type Stage struct {
	Name string // the AS name, empty if none
	From string // the base image or stage
	// Instructions are the stage's lines after FROM, keyword upper-cased.
	Instructions []Instruction
}

// Instruction is one Dockerfile instruction.
type Instruction struct {
	Keyword string
	Args    string
}

// ParseDockerfile reads the stages of a Dockerfile. It understands what this
// repository's Dockerfile uses, not the whole syntax (no heredocs, no
// escape-character directive).
func ParseDockerfile(path string) (*Dockerfile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open dockerfile: %w", err)
	}
	defer f.Close()
	var df Dockerfile
	var cur *Stage
	var line strings.Builder
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		text := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(text, "#") || (text == "" && line.Len() == 0) {
			continue
		}
		if cont, ok := strings.CutSuffix(text, `\`); ok {
			line.WriteString(cont + " ")
			continue
		}
		line.WriteString(text)
		keyword, args, _ := strings.Cut(strings.TrimSpace(line.String()), " ")
		line.Reset()
		keyword = strings.ToUpper(keyword)
		args = strings.TrimSpace(args)
		if keyword == "FROM" {
			fields := strings.Fields(args)
			var s Stage
			for i := 0; i < len(fields); i++ {
				switch {
				case strings.HasPrefix(fields[i], "--"):
				case s.From == "":
					s.From = fields[i]
				case strings.EqualFold(fields[i], "AS") && i+1 < len(fields):
					s.Name = fields[i+1]
					i++
				}
			}
			df.Stages = append(df.Stages, s)
			cur = &df.Stages[len(df.Stages)-1]
			continue
		}
		if cur == nil {
			if keyword == "ARG" {
				continue // a global ARG before the first FROM
			}
			return nil, fmt.Errorf("%s:%d: %s before the first FROM", path, n, keyword)
		}
		cur.Instructions = append(cur.Instructions, Instruction{Keyword: keyword, Args: args})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read dockerfile: %w", err)
	}
	if len(df.Stages) == 0 {
		return nil, fmt.Errorf("%s: no FROM", path)
	}
	return &df, nil
}

// Stage returns the stage named name.
func (d *Dockerfile) Stage(name string) (*Stage, bool) {
	for i := range d.Stages {
		if d.Stages[i].Name == name {
			return &d.Stages[i], true
		}
	}
	return nil, false
}

// Chain is the stage and the stages it is built FROM, nearest first.
func (d *Dockerfile) Chain(name string) []*Stage {
	var chain []*Stage
	for s, ok := d.Stage(name); ok && len(chain) <= len(d.Stages); s, ok = d.Stage(s.From) {
		chain = append(chain, s)
	}
	return chain
}

// Find returns the first instruction with keyword in the stage and its
// bases, nearest first (as EXPOSE and ENTRYPOINT are inherited).
func (d *Dockerfile) Find(stage, keyword string) (Instruction, bool) {
	for _, s := range d.Chain(stage) {
		for i := len(s.Instructions) - 1; i >= 0; i-- {
			if s.Instructions[i].Keyword == keyword {
				return s.Instructions[i], true
			}
		}
	}
	return Instruction{}, false
}

// Copies reports whether the stage or one of its bases copies src (any
// source when src is empty) to dest.
func (d *Dockerfile) Copies(stage, src, dest string) bool {
	for _, s := range d.Chain(stage) {
		for _, in := range s.Instructions {
			if in.Keyword != "COPY" {
				continue
			}
			f := strings.Fields(in.Args)
			if len(f) < 2 || f[len(f)-1] != dest {
				continue
			}
			if src == "" || slices.Contains(f[:len(f)-1], src) {
				return true
			}
		}
	}
	return false
}

// ExecForm decodes the JSON array form of ENTRYPOINT or CMD.
func (in Instruction) ExecForm() ([]string, error) {
	var argv []string
	if err := json.Unmarshal([]byte(in.Args), &argv); err != nil {
		return nil, fmt.Errorf("%s %s is not in exec (JSON array) form: %w", in.Keyword, in.Args, err)
	}
	return argv, nil
}
