// SPDX-License-Identifier: MIT
// cxx_churn.cc - a multi-threaded C++ program for the drop-in: 4 threads
// churn std::vector, std::string, std::map and std::unordered_map, and hand
// heap objects to the next thread, which frees them (cross-thread frees of
// plain, array and over-aligned operator new).  Each thread leaves a result
// that the main thread reads and frees after the thread has exited (a dead
// thread's live blocks stay valid).  Prints checksums that depend only on
// the seeds, never on timing or addresses: what a thread receives comes from
// one producer in FIFO order, and unordered containers are summed in an
// order-free way.  Run by compare.sh on memkit and on the system allocator.
//
// usage: cxx_churn [ROUNDS]
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

constexpr int kThreads = 4;
constexpr int kPerRound = 40; // messages a thread sends each round

struct Rng {
    uint64_t s;
    uint32_t next()
    {
        s = s * 6364136223846793005u + 1442695040888963407u;
        return static_cast<uint32_t>(s >> 33);
    }
};

uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = static_cast<const unsigned char *>(p);
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 1099511628211u;
    return h;
}
uint64_t fnv(uint64_t h, const std::string &s) { return fnv(h, s.data(), s.size()); }
uint64_t fnv(uint64_t h, uint64_t v) { return fnv(h, &v, sizeof v); }

std::string random_string(Rng &r, unsigned max)
{
    std::string s;
    unsigned n = r.next() % max;
    for (unsigned i = 0; i < n; i++)
        s += static_cast<char>('a' + r.next() % 26); // grows: realloc churn
    return s;
}

// An over-aligned object: operator new(size_t, align_val_t).
struct alignas(64) Block {
    uint64_t words[12];
};

// What one thread hands to the next.
struct Msg {
    std::string text;
    std::vector<uint32_t> numbers;
    std::unique_ptr<Block> block;
    std::unique_ptr<char[]> raw; // operator new[]
    size_t raw_len;
};

// A FIFO with one producer and one consumer.
struct Queue {
    std::mutex m;
    std::condition_variable cv;
    std::deque<std::unique_ptr<Msg>> q;

    void push(std::unique_ptr<Msg> msg)
    {
        {
            std::lock_guard<std::mutex> g(m);
            q.push_back(std::move(msg));
        }
        cv.notify_one();
    }
    std::unique_ptr<Msg> pop(bool wait)
    {
        std::unique_lock<std::mutex> g(m);
        if (wait)
            cv.wait(g, [this] { return !q.empty(); });
        if (q.empty())
            return nullptr;
        std::unique_ptr<Msg> msg = std::move(q.front());
        q.pop_front();
        return msg;
    }
};

Queue queues[kThreads];

struct Result {
    uint64_t work = 14695981039346656037u; // this thread's own containers
    uint64_t received = 14695981039346656037u; // messages, in FIFO order
    long messages = 0;
    std::vector<std::string> *leftovers = nullptr; // freed by main
};

uint64_t consume(uint64_t h, const Msg &m)
{
    h = fnv(h, m.text);
    for (uint32_t x : m.numbers)
        h = fnv(h, x);
    for (uint64_t w : m.block->words)
        h = fnv(h, w);
    return fnv(h, m.raw.get(), m.raw_len);
}

void worker(int id, int rounds, Result *res)
{
    Rng r{static_cast<uint64_t>(id) * 7919 + 1};
    Queue &out = queues[(id + 1) % kThreads];
    Queue &in = queues[id];
    const long expect = static_cast<long>(rounds) * kPerRound;
    std::map<std::string, int> tree;
    std::unordered_map<uint64_t, std::vector<int>> table;

    for (int round = 0; round < rounds; round++) {
        // vectors of strings, sorted and partly dropped
        std::vector<std::string> words;
        for (int i = 0; i < 300; i++)
            words.push_back(random_string(r, 40));
        std::sort(words.begin(), words.end());
        for (const std::string &w : words)
            res->work = fnv(res->work, w);
        words.erase(words.begin(), words.begin() + 150);
        words.shrink_to_fit();

        // an ordered map that keeps growing and shrinking
        for (int i = 0; i < 200; i++)
            tree[random_string(r, 12)] += i;
        for (int i = 0; i < 150 && !tree.empty(); i++)
            tree.erase(tree.begin());
        // a hash table of vectors
        for (int i = 0; i < 200; i++)
            table[r.next() % 5000].push_back(i + round);
        for (int i = 0; i < 100; i++)
            table.erase(r.next() % 5000);

        // send this round's messages
        for (int i = 0; i < kPerRound; i++) {
            auto m = std::make_unique<Msg>();
            m->text = random_string(r, 200);
            m->numbers.resize(r.next() % 64);
            for (uint32_t &x : m->numbers)
                x = r.next();
            m->block = std::make_unique<Block>();
            for (uint64_t &w : m->block->words)
                w = r.next();
            m->raw_len = 1 + r.next() % 3000; // small to a few pages
            m->raw.reset(new char[m->raw_len]);
            for (size_t k = 0; k < m->raw_len; k += 97)
                m->raw[k] = static_cast<char>(r.next());
            for (size_t k = 0; k < m->raw_len; k++)
                if (k % 97)
                    m->raw[k] = static_cast<char>(k);
            out.push(std::move(m));
        }
        // take what has arrived, without waiting; freeing it here is a
        // free of another thread's memory
        while (std::unique_ptr<Msg> m = in.pop(false)) {
            res->received = consume(res->received, *m);
            res->messages++;
        }
    }
    while (res->messages < expect) {
        std::unique_ptr<Msg> m = in.pop(true);
        res->received = consume(res->received, *m);
        res->messages++;
    }

    for (const auto &kv : tree)
        res->work = fnv(fnv(res->work, kv.first), static_cast<uint64_t>(kv.second));
    uint64_t table_sum = 0; // order-free
    for (const auto &kv : table) {
        uint64_t h = fnv(14695981039346656037u, kv.first);
        for (int v : kv.second)
            h = fnv(h, static_cast<uint64_t>(v));
        table_sum += h;
    }
    res->work = fnv(res->work, table_sum);

    // blocks that outlive this thread
    res->leftovers = new std::vector<std::string>;
    for (int i = 0; i < 1000; i++)
        res->leftovers->push_back(random_string(r, 100));
}

} // namespace

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? std::atoi(argv[1]) : 300;
    if (rounds < 1) {
        std::fprintf(stderr, "usage: cxx_churn [ROUNDS]\n");
        return 2;
    }
    std::vector<Result> results(kThreads);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; i++)
        threads.emplace_back(worker, i, rounds, &results[i]);
    for (std::thread &t : threads)
        t.join();

    uint64_t all = 14695981039346656037u;
    for (int i = 0; i < kThreads; i++) {
        Result &res = results[i];
        uint64_t left = 14695981039346656037u;
        for (const std::string &s : *res.leftovers)
            left = fnv(left, s);
        delete res.leftovers; // allocated by a thread that has exited
        std::printf("thread %d: work %016llx, received %ld messages %016llx, "
                    "leftovers %016llx\n", i,
                    static_cast<unsigned long long>(res.work), res.messages,
                    static_cast<unsigned long long>(res.received),
                    static_cast<unsigned long long>(left));
        all = fnv(fnv(fnv(all, res.work), res.received), left);
    }
    // nothrow new of an impossible size: NULL, not an exception
    char *huge = new (std::nothrow) char[static_cast<size_t>(1) << 62];
    std::printf("nothrow new of 2^62 bytes: %s\n", huge ? "memory?!" : "null");
    delete[] huge;
    std::printf("checksum %016llx\n", static_cast<unsigned long long>(all));
    return 0;
}
