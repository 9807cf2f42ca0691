// build.sh smoke test: run as /sandbox/main.go through sandbox.command.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"sync"
)

func main() {
	var wg sync.WaitGroup
	squares := make([]int, 8)
	for i := range squares {
		wg.Add(1)
		go func(i int) { defer wg.Done(); squares[i] = i * i }(i)
	}
	wg.Wait()
	sort.Sort(sort.Reverse(sort.IntSlice(squares)))
	b, err := json.Marshal(map[string]any{"squares": squares, "sqrt2": math.Sqrt2})
	if err != nil {
		panic(err)
	}
	if err := os.WriteFile("/data/smoke.json", b, 0o644); err != nil {
		panic(err)
	}
	rec := httptest.NewRecorder()
	http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, r.URL.Path) }).
		ServeHTTP(rec, httptest.NewRequest("GET", "/ok", nil))
	body, _ := io.ReadAll(rec.Result().Body)
	if string(body) != "/ok" || squares[0] != 49 {
		fmt.Fprintln(os.Stderr, "unexpected:", string(body), squares)
		os.Exit(1)
	}
	wd, _ := os.Getwd()
	fmt.Println("uid", os.Getuid(), "cwd", wd)
	fmt.Println("smoke ok")
}
