// switchyard native addon: a thin layer over libbpf.
//
// Arguments arrive validated from src/bpf/ (TypeScript); this file only turns
// them into libbpf / bpf(2) calls and turns failures into JS errors carrying
// `errno` and `code`. No policy lives here. File descriptors cross into JS as
// numbers; every fd or object this addon creates is tracked and closed by one
// environment cleanup hook if JS has not closed it first.

#include <napi.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include <cerrno>
#include <csignal>
#include <cstdarg>
#include <cstring>
#include <fcntl.h>
#include <malloc.h>
#include <sched.h>
#include <sys/mman.h>
#include <thread>
#include <net/if.h>
#include <pthread.h>
#include <mutex>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

// ---------------------------------------------------------------- errors

std::string ErrnoName(int err) {
  const char *n = strerrorname_np(err);
  return n ? n : "E" + std::to_string(err);
}

[[noreturn]] void ThrowErrno(Napi::Env env, int err, const std::string &what,
                             const std::string &detail = "") {
  if (err < 0) err = -err;
  std::string msg = what + ": " + strerror(err) + " (" + ErrnoName(err) + ")";
  if (!detail.empty()) msg += "\n" + detail;
  Napi::Error e = Napi::Error::New(env, msg);
  e.Set("errno", Napi::Number::New(env, err));
  e.Set("code", Napi::String::New(env, ErrnoName(err)));
  e.Set("syscall", Napi::String::New(env, what));
  throw e;
}

// libbpf's messages are collected while a call that may fail runs (open,
// load), so that the verifier log ends up in the thrown error.
std::mutex g_log_mu;
std::string g_log;
bool g_capture = false;

int LibbpfPrint(enum libbpf_print_level level, const char *fmt, va_list args) {
  if (level == LIBBPF_DEBUG) return 0;
  char buf[4096];
  int n = vsnprintf(buf, sizeof(buf), fmt, args);
  std::lock_guard<std::mutex> lock(g_log_mu);
  if (g_capture && g_log.size() < (1u << 20)) g_log.append(buf, n > 0 ? std::min<size_t>(n, sizeof(buf) - 1) : 0);
  return 0;
}

// The verifier stops with EAGAIN as soon as a signal is pending for the loading thread
// (kernel/bpf/verifier.c checks signal_pending() while it walks a program) and libbpf tries a
// load only a few times: a process sampled by a profiler (V8's --cpu-prof sends SIGPROF to the
// main thread every interval) or hit by a stream of signals never gets its programs loaded.
// Signals wait for the load instead (well under a second) and arrive when the mask is restored;
// process-directed ones (SIGTERM) go to a thread that does not block them meanwhile.
struct SignalsHeld {
  sigset_t old;
  SignalsHeld() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
  }
  ~SignalsHeld() { pthread_sigmask(SIG_SETMASK, &old, nullptr); }
  SignalsHeld(const SignalsHeld &) = delete;
  SignalsHeld &operator=(const SignalsHeld &) = delete;
};

struct LogCapture {
  LogCapture() {
    std::lock_guard<std::mutex> lock(g_log_mu);
    g_log.clear();
    g_capture = true;
  }
  ~LogCapture() {
    std::lock_guard<std::mutex> lock(g_log_mu);
    g_capture = false;
  }
  std::string Take() {
    std::lock_guard<std::mutex> lock(g_log_mu);
    std::string s;
    s.swap(g_log);
    return s;
  }
};

// ---------------------------------------------------------------- handles

struct AddonData {
  std::set<int> fds;
  std::set<bpf_object *> objects;
};

// One process-wide registry: the addon is used from the main thread only.
AddonData g_data;
AddonData *Data(Napi::Env) { return &g_data; }

int TrackFd(Napi::Env env, int fd) {
  Data(env)->fds.insert(fd);
  return fd;
}

void CleanupAll(AddonData *d) {
  for (int fd : d->fds) close(fd);
  d->fds.clear();
  for (bpf_object *o : d->objects) bpf_object__close(o);
  d->objects.clear();
}

// ---------------------------------------------------------------- argument helpers

int FdArg(const Napi::CallbackInfo &info, size_t i) { return info[i].As<Napi::Number>().Int32Value(); }
uint32_t U32Arg(const Napi::CallbackInfo &info, size_t i) { return info[i].As<Napi::Number>().Uint32Value(); }
std::string StrArg(const Napi::CallbackInfo &info, size_t i) { return info[i].As<Napi::String>().Utf8Value(); }
Napi::Buffer<uint8_t> BufArg(const Napi::CallbackInfo &info, size_t i) { return info[i].As<Napi::Buffer<uint8_t>>(); }

// ---------------------------------------------------------------- BTF types as trees

// A BTF type as the migration code compares and converts it: typedefs and
// modifiers resolved; { kind: int|struct|union|array|ptr|other, size,
// members?: [{ name, offset (bytes), bits (bitfield width or 0), type }],
// elem?, count? }. Enums are ints of their size.
// Member j of a struct or union: its name and byte offset (a bitfield's: its bit offset / 8).
Napi::Object MemberBase(Napi::Env env, const struct btf *btf, const struct btf_type *t, int j) {
  const struct btf_member *m = btf_members(t) + j;
  Napi::Object mo = Napi::Object::New(env);
  mo.Set("name", btf__name_by_offset(btf, m->name_off));
  mo.Set("offset", btf_member_bit_offset(t, j) / 8);
  return mo;
}

Napi::Value DescribeType(Napi::Env env, const struct btf *btf, uint32_t id, int depth) {
  const struct btf_type *t = btf__type_by_id(btf, id);
  for (int guard = 0; t && guard < 16; guard++) {
    int k = btf_kind(t);
    if (k != BTF_KIND_TYPEDEF && k != BTF_KIND_VOLATILE && k != BTF_KIND_CONST && k != BTF_KIND_RESTRICT &&
        k != BTF_KIND_TYPE_TAG)
      break;
    id = t->type;
    t = btf__type_by_id(btf, id);
  }
  if (!t || depth > 8) return env.Null();
  Napi::Object o = Napi::Object::New(env);
  __s64 sz = btf__resolve_size(btf, id);
  o.Set("size", static_cast<double>(sz < 0 ? 0 : sz));
  switch (btf_kind(t)) {
    case BTF_KIND_INT:
    case BTF_KIND_ENUM:
    case BTF_KIND_ENUM64:
      o.Set("kind", "int");
      break;
    case BTF_KIND_PTR:
      o.Set("kind", "ptr");
      break;
    case BTF_KIND_ARRAY: {
      const struct btf_array *a = btf_array(t);
      o.Set("kind", "array");
      o.Set("elem", DescribeType(env, btf, a->type, depth + 1));
      o.Set("count", a->nelems);
      break;
    }
    case BTF_KIND_STRUCT:
    case BTF_KIND_UNION: {
      o.Set("kind", btf_kind(t) == BTF_KIND_STRUCT ? "struct" : "union");
      Napi::Array members = Napi::Array::New(env);
      const struct btf_member *m = btf_members(t);
      for (int j = 0; j < btf_vlen(t); j++, m++) {
        Napi::Object mo = MemberBase(env, btf, t, j);
        mo.Set("bits", btf_member_bitfield_size(t, j));
        mo.Set("type", DescribeType(env, btf, m->type, depth + 1));
        members.Set(j, mo);
      }
      o.Set("members", members);
      break;
    }
    default:
      o.Set("kind", "other");
  }
  return o;
}

// ---------------------------------------------------------------- BpfObject

class BpfObject : public Napi::ObjectWrap<BpfObject> {
 public:
  static Napi::Function Init(Napi::Env env) {
    return DefineClass(env, "BpfObject",
                       {
                           InstanceMethod("setMapMaxEntries", &BpfObject::SetMapMaxEntries),
                           InstanceMethod("setGlobal", &BpfObject::SetGlobal),
                           InstanceMethod("load", &BpfObject::Load),
                           InstanceMethod("programs", &BpfObject::Programs),
                           InstanceMethod("maps", &BpfObject::Maps),
                           InstanceMethod("mapBtf", &BpfObject::MapBtf),
                           InstanceMethod("close", &BpfObject::Close),
                       });
  }

  // new BpfObject(path, pinRoot | null)
  explicit BpfObject(const Napi::CallbackInfo &info) : Napi::ObjectWrap<BpfObject>(info) {
    Napi::Env env = info.Env();
    std::string path = StrArg(info, 0);
    std::string pin_root = info[1].IsString() ? StrArg(info, 1) : "";
    LIBBPF_OPTS(bpf_object_open_opts, opts);
    if (!pin_root.empty()) opts.pin_root_path = pin_root.c_str();
    LogCapture cap;
    obj_ = bpf_object__open_file(path.c_str(), &opts);
    int err = libbpf_get_error(obj_);
    if (err) {
      obj_ = nullptr;
      ThrowErrno(env, err, "bpf_object__open_file(" + path + ")", cap.Take());
    }
    Data(env)->objects.insert(obj_);
  }

  ~BpfObject() override { Release(); }

 private:
  // Closes the object unless the cleanup hook already did.
  void Release() {
    if (obj_ && g_data.objects.erase(obj_)) bpf_object__close(obj_);
    obj_ = nullptr;
  }

  bpf_object *Obj(Napi::Env env) {
    if (!obj_) ThrowErrno(env, EBADF, "bpf object is closed");
    return obj_;
  }

  bpf_map *Map(Napi::Env env, const std::string &name) {
    bpf_map *m = bpf_object__find_map_by_name(Obj(env), name.c_str());
    if (!m) ThrowErrno(env, ENOENT, "no map named " + name);
    return m;
  }

  Napi::Value SetMapMaxEntries(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    std::string name = StrArg(info, 0);
    int err = bpf_map__set_max_entries(Map(env, name), U32Arg(info, 1));
    if (err) ThrowErrno(env, err, "bpf_map__set_max_entries(" + name + ")");
    return env.Undefined();
  }

  // setGlobal(name, buffer): writes a `const volatile` (.rodata) or .data/.bss
  // global's initial value before load, found by name in the object's BTF.
  Napi::Value SetGlobal(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    std::string var = StrArg(info, 0);
    auto val = BufArg(info, 1);
    bpf_object *obj = Obj(env);
    const struct btf *btf = bpf_object__btf(obj);
    if (!btf) ThrowErrno(env, ENOENT, "object has no BTF");
    bpf_map *m;
    bpf_object__for_each_map(m, obj) {
      if (!bpf_map__is_internal(m)) continue;
      const char *mname = bpf_map__name(m);
      const char *dot = strrchr(mname, '.');
      std::string sec = dot ? dot : mname;  // ".rodata", ".data", ".bss"
      int sec_id = btf__find_by_name_kind(btf, sec.c_str(), BTF_KIND_DATASEC);
      if (sec_id < 0) continue;
      const struct btf_type *t = btf__type_by_id(btf, sec_id);
      const struct btf_var_secinfo *vs = btf_var_secinfos(t);
      for (int i = 0; i < btf_vlen(t); i++, vs++) {
        const struct btf_type *vt = btf__type_by_id(btf, vs->type);
        if (var != btf__name_by_offset(btf, vt->name_off)) continue;
        if (vs->size != val.Length())
          ThrowErrno(env, EINVAL, "global " + var + " has size " + std::to_string(vs->size) + ", got " +
                                      std::to_string(val.Length()));
        size_t sz = 0;
        // libbpf 1.1 returns it const; it is the writable image skeletons write to.
        void *data = const_cast<void *>(static_cast<const void *>(bpf_map__initial_value(m, &sz)));
        if (!data || vs->offset + vs->size > sz) ThrowErrno(env, EINVAL, "global " + var + " has no initial value");
        memcpy(static_cast<char *>(data) + vs->offset, val.Data(), vs->size);
        return env.Undefined();
      }
    }
    ThrowErrno(env, ENOENT, "no global named " + var);
  }

  Napi::Value Load(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    LogCapture cap;
    int err;
    {
      SignalsHeld held;
      err = bpf_object__load(Obj(env));
    }
    if (err) ThrowErrno(env, err, "bpf_object__load", cap.Take());
    return env.Undefined();
  }

  Napi::Value Programs(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    Napi::Array out = Napi::Array::New(env);
    bpf_program *p;
    uint32_t i = 0;
    bpf_object__for_each_program(p, Obj(env)) {
      Napi::Object o = Napi::Object::New(env);
      o.Set("name", bpf_program__name(p));
      o.Set("section", bpf_program__section_name(p));
      o.Set("fd", bpf_program__fd(p));
      o.Set("type", static_cast<uint32_t>(bpf_program__type(p)));
      o.Set("expectedAttachType", static_cast<uint32_t>(bpf_program__expected_attach_type(p)));
      out.Set(i++, o);
    }
    return out;
  }

  Napi::Value Maps(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    Napi::Array out = Napi::Array::New(env);
    bpf_map *m;
    uint32_t i = 0;
    bpf_object__for_each_map(m, Obj(env)) {
      Napi::Object o = Napi::Object::New(env);
      o.Set("name", bpf_map__name(m));
      o.Set("fd", bpf_map__fd(m));
      o.Set("type", static_cast<uint32_t>(bpf_map__type(m)));
      o.Set("keySize", bpf_map__key_size(m));
      o.Set("valueSize", bpf_map__value_size(m));
      o.Set("maxEntries", bpf_map__max_entries(m));
      o.Set("flags", bpf_map__map_flags(m));
      o.Set("internal", bpf_map__is_internal(m));
      const char *pin = bpf_map__pin_path(m);
      o.Set("pinPath", pin ? Napi::Value(Napi::String::New(env, pin)) : env.Null());
      out.Set(i++, o);
    }
    return out;
  }

  // mapBtf(name) -> { key, value, inner } before (or after) load: the key and
  // value types from the object's BTF (null when the map declares none), and
  // for a map of maps the inner map's definition.
  Napi::Value MapBtf(const Napi::CallbackInfo &info) {
    Napi::Env env = info.Env();
    bpf_map *m = Map(env, StrArg(info, 0));
    const struct btf *btf = bpf_object__btf(Obj(env));
    Napi::Object o = Napi::Object::New(env);
    uint32_t k = bpf_map__btf_key_type_id(m), v = bpf_map__btf_value_type_id(m);
    o.Set("key", btf && k ? DescribeType(env, btf, k, 0) : env.Null());
    o.Set("value", btf && v ? DescribeType(env, btf, v, 0) : env.Null());
    bpf_map *in = bpf_map__inner_map(m);
    if (in) {
      Napi::Object d = Napi::Object::New(env);
      d.Set("type", static_cast<uint32_t>(bpf_map__type(in)));
      d.Set("keySize", bpf_map__key_size(in));
      d.Set("valueSize", bpf_map__value_size(in));
      d.Set("flags", bpf_map__map_flags(in));
      o.Set("inner", d);
    } else {
      o.Set("inner", env.Null());
    }
    return o;
  }

  Napi::Value Close(const Napi::CallbackInfo &info) {
    Release();
    return info.Env().Undefined();
  }

  bpf_object *obj_ = nullptr;
};

// ---------------------------------------------------------------- process memory

// mallocTrim() -> boolean: glibc's malloc_trim(0), which gives the kernel back
// the free pages of every arena (not only the top of the heap). Large JSON
// lists and apply bursts leave tens of MiB of freed malloc memory resident
// that glibc keeps for reuse; the agent calls this after its heap reclaim.
// True when memory was released.
Napi::Value MallocTrim(const Napi::CallbackInfo &info) {
  return Napi::Boolean::New(info.Env(), malloc_trim(0) != 0);
}

// ---------------------------------------------------------------- fds, pins, links

Napi::Value Close(const Napi::CallbackInfo &info) {
  int fd = FdArg(info, 0);
  if (Data(info.Env())->fds.erase(fd)) close(fd);
  return info.Env().Undefined();
}

Napi::Value ObjPin(const Napi::CallbackInfo &info) {
  std::string path = StrArg(info, 1);
  if (bpf_obj_pin(FdArg(info, 0), path.c_str())) ThrowErrno(info.Env(), errno, "bpf_obj_pin(" + path + ")");
  return info.Env().Undefined();
}

Napi::Value ObjGet(const Napi::CallbackInfo &info) {
  std::string path = StrArg(info, 0);
  int fd = bpf_obj_get(path.c_str());
  if (fd < 0) ThrowErrno(info.Env(), errno, "bpf_obj_get(" + path + ")");
  return Napi::Number::New(info.Env(), TrackFd(info.Env(), fd));
}

// linkCreateCgroup(progFd, cgroupPath, attachType) -> link fd
Napi::Value LinkCreateCgroup(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  std::string cg = StrArg(info, 1);
  int cg_fd = open(cg.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (cg_fd < 0) ThrowErrno(env, errno, "open(" + cg + ")");
  int fd = bpf_link_create(FdArg(info, 0), cg_fd, static_cast<enum bpf_attach_type>(U32Arg(info, 2)), nullptr);
  int err = errno;
  close(cg_fd);
  if (fd < 0) ThrowErrno(env, err, "bpf_link_create(" + cg + ")");
  return Napi::Number::New(env, TrackFd(env, fd));
}

Napi::Value LinkUpdate(const Napi::CallbackInfo &info) {
  if (bpf_link_update(FdArg(info, 0), FdArg(info, 1), nullptr))
    ThrowErrno(info.Env(), errno, "bpf_link_update");
  return info.Env().Undefined();
}

Napi::Value LinkDetach(const Napi::CallbackInfo &info) {
  if (bpf_link_detach(FdArg(info, 0))) ThrowErrno(info.Env(), errno, "bpf_link_detach");
  return info.Env().Undefined();
}

Napi::Value LinkInfo(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  struct bpf_link_info li;
  memset(&li, 0, sizeof(li));
  uint32_t len = sizeof(li);
  if (bpf_obj_get_info_by_fd(FdArg(info, 0), &li, &len)) ThrowErrno(env, errno, "bpf_obj_get_info_by_fd(link)");
  Napi::Object o = Napi::Object::New(env);
  o.Set("id", li.id);
  o.Set("progId", li.prog_id);
  o.Set("type", li.type);
  if (li.type == BPF_LINK_TYPE_CGROUP) {
    o.Set("cgroupId", Napi::BigInt::New(env, static_cast<uint64_t>(li.cgroup.cgroup_id)));
    o.Set("attachType", li.cgroup.attach_type);
  }
  // BPF_LINK_TYPE_TCX (11) is newer than these headers: its union member is
  // { __u32 ifindex; __u32 attach_type; } at the start of the union.
  if (li.type == 11) {
    uint32_t tcx[2];
    memcpy(tcx, &li.cgroup, sizeof(tcx));
    o.Set("ifindex", tcx[0]);
    o.Set("attachType", tcx[1]);
  }
  return o;
}

// linkCreateTcx(progFd, ifindex, attachType) -> link fd. attachType is
// BPF_TCX_INGRESS (46) or BPF_TCX_EGRESS (47); the ifindex is resolved in the
// caller's network namespace. libbpf 1.1 has no bpf_program__attach_tcx, but
// its bpf_link_create passes the target (an ifindex here) through unchanged.
Napi::Value LinkCreateTcx(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  int fd = bpf_link_create(FdArg(info, 0), static_cast<int>(U32Arg(info, 1)),
                           static_cast<enum bpf_attach_type>(U32Arg(info, 2)), nullptr);
  if (fd < 0) ThrowErrno(env, errno, "bpf_link_create(tcx, ifindex " + std::to_string(U32Arg(info, 1)) + ")");
  return Napi::Number::New(env, TrackFd(env, fd));
}

// linkCreateIter(progFd) -> link fd of a BPF iterator program (iter/udp, …).
Napi::Value LinkCreateIter(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  int fd = bpf_link_create(FdArg(info, 0), 0, BPF_TRACE_ITER, nullptr);
  if (fd < 0) ThrowErrno(env, errno, "bpf_link_create(iter)");
  return Napi::Number::New(env, TrackFd(env, fd));
}

// iterRead(linkFd, netnsPath | null) -> Buffer: opens an iterator of the link
// and reads it to the end. With a path, the iterator is opened inside that
// network namespace (socket iterators walk the namespace they were opened
// in): a short-lived thread of its own enters the namespace, so neither the
// JS thread nor libuv's pool ever leaves the agent's.
Napi::Value IterRead(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  int link_fd = FdArg(info, 0);
  std::string netns = info[1].IsString() ? StrArg(info, 1) : "";
  std::string out;
  int err = 0;
  std::string what;
  std::thread t([&]() {
    if (!netns.empty()) {
      int nfd = open(netns.c_str(), O_RDONLY | O_CLOEXEC);
      if (nfd < 0) { err = errno; what = "open(" + netns + ")"; return; }
      int r = setns(nfd, CLONE_NEWNET);
      int e = errno;
      close(nfd);
      if (r < 0) { err = e; what = "setns(" + netns + ")"; return; }
    }
    int ifd = bpf_iter_create(link_fd);
    if (ifd < 0) { err = errno; what = "bpf_iter_create"; return; }
    char buf[8192];
    for (;;) {
      ssize_t n = read(ifd, buf, sizeof(buf));
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        err = errno; what = "read(iterator)"; break;
      }
      if (n == 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    close(ifd);
  });
  t.join();
  if (err) ThrowErrno(env, err, what);
  return Napi::Buffer<char>::Copy(env, out.data(), out.size());
}

// ifIndex(name) -> ifindex in the caller's network namespace
Napi::Value IfIndex(const Napi::CallbackInfo &info) {
  std::string name = StrArg(info, 0);
  unsigned idx = if_nametoindex(name.c_str());
  if (idx == 0) ThrowErrno(info.Env(), errno, "if_nametoindex(" + name + ")");
  return Napi::Number::New(info.Env(), idx);
}

// clsact fallback for kernels without TCX.
// tcAttach(ifindex, egress, progFd, handle, priority): creates the clsact
// qdisc if needed and attaches (or replaces) the direct-action filter.
Napi::Value TcAttach(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = static_cast<int>(U32Arg(info, 0)),
              .attach_point = info[1].As<Napi::Boolean>().Value() ? BPF_TC_EGRESS : BPF_TC_INGRESS);
  int err = bpf_tc_hook_create(&hook);
  if (err && err != -EEXIST) ThrowErrno(env, err, "bpf_tc_hook_create");
  LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = FdArg(info, 2), .flags = BPF_TC_F_REPLACE,
              .handle = U32Arg(info, 3), .priority = U32Arg(info, 4));
  err = bpf_tc_attach(&hook, &opts);
  if (err) ThrowErrno(env, err, "bpf_tc_attach");
  return Napi::Number::New(env, opts.prog_id);
}

// tcDetach(ifindex, egress, handle, priority) -> true if a filter was removed
Napi::Value TcDetach(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = static_cast<int>(U32Arg(info, 0)),
              .attach_point = info[1].As<Napi::Boolean>().Value() ? BPF_TC_EGRESS : BPF_TC_INGRESS);
  LIBBPF_OPTS(bpf_tc_opts, opts, .handle = U32Arg(info, 2), .priority = U32Arg(info, 3));
  int err = bpf_tc_detach(&hook, &opts);
  if (err == -ENOENT || err == -EINVAL) return Napi::Boolean::New(env, false);
  if (err) ThrowErrno(env, err, "bpf_tc_detach");
  return Napi::Boolean::New(env, true);
}

// tcQuery(ifindex, egress, handle, priority) -> prog id or null
Napi::Value TcQuery(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = static_cast<int>(U32Arg(info, 0)),
              .attach_point = info[1].As<Napi::Boolean>().Value() ? BPF_TC_EGRESS : BPF_TC_INGRESS);
  LIBBPF_OPTS(bpf_tc_opts, opts, .handle = U32Arg(info, 2), .priority = U32Arg(info, 3));
  int err = bpf_tc_query(&hook, &opts);
  if (err == -ENOENT || err == -EINVAL) return env.Null();
  if (err) ThrowErrno(env, err, "bpf_tc_query");
  return Napi::Number::New(env, opts.prog_id);
}

Napi::Value ProgInfo(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  struct bpf_prog_info pi;
  memset(&pi, 0, sizeof(pi));
  uint32_t len = sizeof(pi);
  if (bpf_obj_get_info_by_fd(FdArg(info, 0), &pi, &len)) ThrowErrno(env, errno, "bpf_obj_get_info_by_fd(prog)");
  Napi::Object o = Napi::Object::New(env);
  o.Set("id", pi.id);
  o.Set("type", pi.type);
  o.Set("name", std::string(pi.name));
  o.Set("runCount", Napi::BigInt::New(env, static_cast<uint64_t>(pi.run_cnt)));
  return o;
}

// ---------------------------------------------------------------- maps

Napi::Value MapInfo(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  struct bpf_map_info mi;
  memset(&mi, 0, sizeof(mi));
  uint32_t len = sizeof(mi);
  if (bpf_obj_get_info_by_fd(FdArg(info, 0), &mi, &len)) ThrowErrno(env, errno, "bpf_obj_get_info_by_fd(map)");
  Napi::Object o = Napi::Object::New(env);
  o.Set("id", mi.id);
  o.Set("type", mi.type);
  o.Set("keySize", mi.key_size);
  o.Set("valueSize", mi.value_size);
  o.Set("maxEntries", mi.max_entries);
  o.Set("flags", mi.map_flags);
  o.Set("name", std::string(mi.name));
  o.Set("btfId", mi.btf_id);
  o.Set("btfKeyTypeId", mi.btf_key_type_id);
  o.Set("btfValueTypeId", mi.btf_value_type_id);
  return o;
}

// btfLayout(btfId, keyTypeId, valueTypeId) -> { key, value }: a map's types
// from the BTF the kernel holds for it (what the build that made it declared).
Napi::Value BtfLayout(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  struct btf *btf = btf__load_from_kernel_by_id(U32Arg(info, 0));
  int err = libbpf_get_error(btf);
  if (err) ThrowErrno(env, err, "btf__load_from_kernel_by_id");
  Napi::Object o = Napi::Object::New(env);
  uint32_t k = U32Arg(info, 1), v = U32Arg(info, 2);
  o.Set("key", k ? DescribeType(env, btf, k, 0) : env.Null());
  o.Set("value", v ? DescribeType(env, btf, v, 0) : env.Null());
  btf__free(btf);
  return o;
}

Napi::Value MapGetFdById(const Napi::CallbackInfo &info) {
  int fd = bpf_map_get_fd_by_id(U32Arg(info, 0));
  if (fd < 0) ThrowErrno(info.Env(), errno, "bpf_map_get_fd_by_id");
  return Napi::Number::New(info.Env(), TrackFd(info.Env(), fd));
}

// mapCreate(type, keySize, valueSize, maxEntries, flags, name) -> fd
Napi::Value MapCreate(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = U32Arg(info, 4));
  std::string name = StrArg(info, 5);
  int fd = bpf_map_create(static_cast<enum bpf_map_type>(U32Arg(info, 0)), name.c_str(), U32Arg(info, 1),
                          U32Arg(info, 2), U32Arg(info, 3), &opts);
  if (fd < 0) ThrowErrno(env, errno, "bpf_map_create(" + name + ")");
  return Napi::Number::New(env, TrackFd(env, fd));
}

// mapMmapWrite(fd, data, offset) / mapMmapRead(fd, length, offset) -> Buffer:
// copy to / from the value area of a BPF_F_MMAPABLE array (element stride is
// the value size rounded up to 8 bytes). One mapping per call, of the pages
// that hold [off, off + len) only: the kernel populates every page of a BPF
// array mapping at mmap time, so mapping a large pool whole for each table
// would cost far more than the copy.
struct ValueArea {
  void *base = nullptr;  // the mapping
  size_t len = 0;        // its length
  uint8_t *at = nullptr; // byte `off` of the value area
};

static bool MapValueArea(Napi::Env env, int fd, size_t off, size_t len, int prot, ValueArea *a) {
  size_t pg = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_t start = off / pg * pg;
  a->len = (off + len - start + pg - 1) / pg * pg;
  if (a->len == 0) a->len = pg;
  a->base = mmap(nullptr, a->len, prot, MAP_SHARED, fd, static_cast<off_t>(start));
  if (a->base == MAP_FAILED) {
    ThrowErrno(env, errno, "mmap of BPF map");
    return false;
  }
  a->at = static_cast<uint8_t *>(a->base) + (off - start);
  return true;
}

static size_t SizeArg(const Napi::CallbackInfo &info, size_t i) {
  return static_cast<size_t>(info[i].As<Napi::Number>().Int64Value());
}

// mapMmapWrite(fd, data, byteOffset)
Napi::Value MapMmapWrite(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  auto data = BufArg(info, 1);
  ValueArea a;
  if (!MapValueArea(env, FdArg(info, 0), SizeArg(info, 2), data.Length(), PROT_READ | PROT_WRITE, &a)) return env.Undefined();
  memcpy(a.at, data.Data(), data.Length());
  munmap(a.base, a.len);
  return env.Undefined();
}

// mapMmapRead(fd, length, byteOffset) -> Buffer
Napi::Value MapMmapRead(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  size_t len = SizeArg(info, 1);
  ValueArea a;
  if (!MapValueArea(env, FdArg(info, 0), SizeArg(info, 2), len, PROT_READ, &a)) return env.Undefined();
  auto out = Napi::Buffer<uint8_t>::Copy(env, a.at, len);
  munmap(a.base, a.len);
  return out;
}

// mapLookup(fd, key, valueSize) -> Buffer | null
Napi::Value MapLookup(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  auto key = BufArg(info, 1);
  auto out = Napi::Buffer<uint8_t>::New(env, U32Arg(info, 2));
  if (bpf_map_lookup_elem(FdArg(info, 0), key.Data(), out.Data())) {
    if (errno == ENOENT) return env.Null();
    ThrowErrno(env, errno, "bpf_map_lookup_elem");
  }
  return out;
}

// mapUpdate(fd, key, value, flags)
Napi::Value MapUpdate(const Napi::CallbackInfo &info) {
  auto key = BufArg(info, 1);
  auto val = BufArg(info, 2);
  if (bpf_map_update_elem(FdArg(info, 0), key.Data(), val.Data(), info[3].As<Napi::Number>().Int64Value()))
    ThrowErrno(info.Env(), errno, "bpf_map_update_elem");
  return info.Env().Undefined();
}

// mapDelete(fd, key) -> true if deleted, false if absent
Napi::Value MapDelete(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  auto key = BufArg(info, 1);
  if (bpf_map_delete_elem(FdArg(info, 0), key.Data())) {
    if (errno == ENOENT) return Napi::Boolean::New(env, false);
    ThrowErrno(env, errno, "bpf_map_delete_elem");
  }
  return Napi::Boolean::New(env, true);
}

// mapDump(fd, keySize, valueSize) -> { keys: Buffer, values: Buffer, count }
// Walks the map with get_next_key + lookup. Entries that vanish between the
// two calls are skipped; a walk that restarts from the beginning (the key it
// held was deleted) is bounded by max_entries * 2 steps.
// mapDumpBatch(fd, keySize, valueSize, cursor: Buffer | null, max) ->
//   { keys, values, count, cursor: Buffer | null }: up to `max` entries from
// where `cursor` left off (null: the start); the returned cursor is null once
// the map is exhausted. One BPF_MAP_LOOKUP_BATCH, so a caller can walk a large
// map a slice at a time. Throws EOPNOTSUPP where the map type has no batch ops.
Napi::Value MapDumpBatch(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  int fd = FdArg(info, 0);
  uint32_t ks = U32Arg(info, 1), vs = U32Arg(info, 2), max = U32Arg(info, 4);
  if (max == 0) max = 1;
  std::vector<uint8_t> bk(size_t(ks) * max), bv(size_t(vs) * max);
  uint64_t in_batch = 0, out_batch = 0;
  bool started = !info[3].IsNull() && !info[3].IsUndefined();
  if (started) {
    auto c = info[3].As<Napi::Buffer<uint8_t>>();
    memcpy(&in_batch, c.Data(), std::min<size_t>(c.Length(), sizeof(in_batch)));
  }
  uint32_t n = max;
  int r = bpf_map_lookup_batch(fd, started ? &in_batch : nullptr, &out_batch, bk.data(), bv.data(), &n, nullptr);
  int err = r ? errno : 0;
  if (r && err != ENOENT) ThrowErrno(env, err, "bpf_map_lookup_batch");
  Napi::Object o = Napi::Object::New(env);
  o.Set("keys", Napi::Buffer<uint8_t>::Copy(env, bk.data(), size_t(n) * ks));
  o.Set("values", Napi::Buffer<uint8_t>::Copy(env, bv.data(), size_t(n) * vs));
  o.Set("count", n);
  if (err == ENOENT) o.Set("cursor", env.Null());
  else o.Set("cursor", Napi::Buffer<uint8_t>::Copy(env, reinterpret_cast<uint8_t *>(&out_batch), sizeof(out_batch)));
  return o;
}

Napi::Value MapDump(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  int fd = FdArg(info, 0);
  uint32_t ks = U32Arg(info, 1), vs = U32Arg(info, 2);
  struct bpf_map_info mi;
  memset(&mi, 0, sizeof(mi));
  uint32_t len = sizeof(mi);
  if (bpf_obj_get_info_by_fd(fd, &mi, &len)) ThrowErrno(env, errno, "bpf_obj_get_info_by_fd(map)");
  std::vector<uint8_t> keys, vals;
  uint32_t count = 0;

  // Batch lookups first: one syscall per chunk instead of two per entry.
  {
    const uint32_t chunk = 4096;
    std::vector<uint8_t> bk(size_t(ks) * chunk), bv(size_t(vs) * chunk);
    uint64_t in_batch = 0, out_batch = 0;  // opaque cursors, 8 bytes suffice for every map type
    bool started = false, supported = true;
    for (;;) {
      uint32_t n = chunk;
      int r = bpf_map_lookup_batch(fd, started ? &in_batch : nullptr, &out_batch, bk.data(), bv.data(), &n, nullptr);
      int err = r ? errno : 0;
      if (r && err != ENOENT) {
        if (!started && (err == EINVAL || err == ENOTSUP || err == EOPNOTSUPP || err == 524 /* ENOTSUPP */)) {
          supported = false;
          break;
        }
        ThrowErrno(env, err, "bpf_map_lookup_batch");
      }
      keys.insert(keys.end(), bk.begin(), bk.begin() + size_t(n) * ks);
      vals.insert(vals.end(), bv.begin(), bv.begin() + size_t(n) * vs);
      count += n;
      if (err == ENOENT) break;
      in_batch = out_batch;
      started = true;
    }
    if (supported) {
      Napi::Object o = Napi::Object::New(env);
      o.Set("keys", Napi::Buffer<uint8_t>::Copy(env, keys.data(), keys.size()));
      o.Set("values", Napi::Buffer<uint8_t>::Copy(env, vals.data(), vals.size()));
      o.Set("count", count);
      return o;
    }
    keys.clear();
    vals.clear();
    count = 0;
  }

  std::vector<uint8_t> cur(ks), next(ks), val(vs);
  bool first = true;
  uint64_t steps = 0, limit = uint64_t(mi.max_entries) * 2 + 16;
  while (steps++ < limit) {
    if (bpf_map_get_next_key(fd, first ? nullptr : cur.data(), next.data())) {
      if (errno == ENOENT) break;
      ThrowErrno(env, errno, "bpf_map_get_next_key");
    }
    first = false;
    if (bpf_map_lookup_elem(fd, next.data(), val.data()) == 0) {
      keys.insert(keys.end(), next.begin(), next.end());
      vals.insert(vals.end(), val.begin(), val.end());
      count++;
    } else if (errno != ENOENT) {
      ThrowErrno(env, errno, "bpf_map_lookup_elem");
    }
    cur.swap(next);
  }
  Napi::Object o = Napi::Object::New(env);
  o.Set("keys", Napi::Buffer<uint8_t>::Copy(env, keys.data(), keys.size()));
  o.Set("values", Napi::Buffer<uint8_t>::Copy(env, vals.data(), vals.size()));
  o.Set("count", count);
  return o;
}

// mapUpdateBatch(fd, keys, values, count, flags) -> number of entries written
Napi::Value MapUpdateBatch(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  auto keys = BufArg(info, 1);
  auto vals = BufArg(info, 2);
  uint32_t count = U32Arg(info, 3);
  LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = static_cast<uint64_t>(info[4].As<Napi::Number>().Int64Value()));
  uint32_t n = count;
  if (bpf_map_update_batch(FdArg(info, 0), keys.Data(), vals.Data(), &n, &opts))
    ThrowErrno(env, errno, "bpf_map_update_batch (" + std::to_string(n) + " of " + std::to_string(count) + " written)");
  return Napi::Number::New(env, n);
}

// mapUpdateEach(fd, keys, values, count, flags) -> { written, exist, failed }: one
// bpf_map_update_elem per entry, going on past failures (a batch update stops
// at the first one): what copying between two maps wants, where "already
// there" (BPF_NOEXIST) and "full" are outcomes to count, not errors.
Napi::Value MapUpdateEach(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  int fd = FdArg(info, 0);
  auto keys = BufArg(info, 1);
  auto vals = BufArg(info, 2);
  uint32_t count = U32Arg(info, 3);
  uint64_t flags = static_cast<uint64_t>(info[4].As<Napi::Number>().Int64Value());
  if (count == 0) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("written", 0);
    o.Set("exist", 0);
    o.Set("failed", 0);
    return o;
  }
  size_t ks = keys.Length() / count, vs = vals.Length() / count;
  if (ks * count != keys.Length() || vs * count != vals.Length()) ThrowErrno(env, EINVAL, "mapUpdateEach: buffers are not count entries");
  uint32_t written = 0, exist = 0, failed = 0;
  for (uint32_t i = 0; i < count; i++) {
    if (bpf_map_update_elem(fd, keys.Data() + i * ks, vals.Data() + i * vs, flags) == 0) written++;
    else if (errno == EEXIST) exist++;
    else failed++;
  }
  Napi::Object o = Napi::Object::New(env);
  o.Set("written", written);
  o.Set("exist", exist);
  o.Set("failed", failed);
  return o;
}

// mapDeleteBatch(fd, keys, count) -> number deleted
Napi::Value MapDeleteBatch(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  auto keys = BufArg(info, 1);
  uint32_t count = U32Arg(info, 2);
  LIBBPF_OPTS(bpf_map_batch_opts, opts);
  uint32_t n = count;
  if (bpf_map_delete_batch(FdArg(info, 0), keys.Data(), &n, &opts))
    ThrowErrno(env, errno, "bpf_map_delete_batch (" + std::to_string(n) + " of " + std::to_string(count) + " deleted)");
  return Napi::Number::New(env, n);
}

// progTestRun(fd, data, repeat, dataOutSize, ctxIn?) -> { retval, data, durationNs, ctx? }
// ctxIn (e.g. a struct __sk_buff) goes in as ctx_in and comes back as ctx_out.
Napi::Value ProgTestRun(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  auto in = BufArg(info, 1);
  std::vector<uint8_t> out(U32Arg(info, 3));
  LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = in.Data(), .data_out = out.data(),
              .data_size_in = static_cast<uint32_t>(in.Length()), .data_size_out = static_cast<uint32_t>(out.size()),
              .repeat = static_cast<int>(U32Arg(info, 2)));
  std::vector<uint8_t> ctx_in, ctx_out;
  if (info.Length() > 4 && info[4].IsBuffer()) {
    auto c = BufArg(info, 4);
    ctx_in.assign(c.Data(), c.Data() + c.Length());
    ctx_out.resize(c.Length());
    opts.ctx_in = ctx_in.data();
    opts.ctx_size_in = static_cast<uint32_t>(ctx_in.size());
    opts.ctx_out = ctx_out.data();
    opts.ctx_size_out = static_cast<uint32_t>(ctx_out.size());
  }
  if (bpf_prog_test_run_opts(FdArg(info, 0), &opts)) ThrowErrno(env, errno, "bpf_prog_test_run");
  Napi::Object o = Napi::Object::New(env);
  o.Set("retval", opts.retval);
  o.Set("data", Napi::Buffer<uint8_t>::Copy(env, out.data(), opts.data_size_out));
  o.Set("durationNs", opts.duration);
  if (!ctx_out.empty()) o.Set("ctx", Napi::Buffer<uint8_t>::Copy(env, ctx_out.data(), opts.ctx_size_out));
  return o;
}

Napi::Value NumPossibleCpus(const Napi::CallbackInfo &info) {
  int n = libbpf_num_possible_cpus();
  if (n < 0) ThrowErrno(info.Env(), n, "libbpf_num_possible_cpus");
  return Napi::Number::New(info.Env(), n);
}

// btfStructs(objPath, names[]) -> { name: { size, members: [{ name, offset, size }] } }
// offset and size in bytes; bitfields are reported with offset in bits / 8.
Napi::Value BtfStructs(const Napi::CallbackInfo &info) {
  Napi::Env env = info.Env();
  std::string path = StrArg(info, 0);
  Napi::Array names = info[1].As<Napi::Array>();
  struct btf *btf = btf__parse_elf(path.c_str(), nullptr);
  int err = libbpf_get_error(btf);
  if (err) ThrowErrno(env, err, "btf__parse_elf(" + path + ")");
  Napi::Object out = Napi::Object::New(env);
  for (uint32_t i = 0; i < names.Length(); i++) {
    std::string name = names.Get(i).As<Napi::String>().Utf8Value();
    int id = btf__find_by_name_kind(btf, name.c_str(), BTF_KIND_STRUCT);
    if (id < 0) continue;
    const struct btf_type *t = btf__type_by_id(btf, id);
    Napi::Object s = Napi::Object::New(env);
    s.Set("size", t->size);
    Napi::Array members = Napi::Array::New(env);
    const struct btf_member *m = btf_members(t);
    for (int j = 0; j < btf_vlen(t); j++, m++) {
      Napi::Object mo = MemberBase(env, btf, t, j);
      __s64 sz = btf__resolve_size(btf, m->type);
      mo.Set("size", static_cast<double>(sz));
      members.Set(j, mo);
    }
    s.Set("members", members);
    out.Set(name, s);
  }
  btf__free(btf);
  return out;
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  env.AddCleanupHook([]() { CleanupAll(&g_data); });
  libbpf_set_print(LibbpfPrint);

  exports.Set("BpfObject", BpfObject::Init(env));
  exports.Set("close", Napi::Function::New(env, Close));
  exports.Set("mallocTrim", Napi::Function::New(env, MallocTrim));
  exports.Set("objPin", Napi::Function::New(env, ObjPin));
  exports.Set("objGet", Napi::Function::New(env, ObjGet));
  exports.Set("linkCreateCgroup", Napi::Function::New(env, LinkCreateCgroup));
  exports.Set("linkCreateTcx", Napi::Function::New(env, LinkCreateTcx));
  exports.Set("linkCreateIter", Napi::Function::New(env, LinkCreateIter));
  exports.Set("iterRead", Napi::Function::New(env, IterRead));
  exports.Set("ifIndex", Napi::Function::New(env, IfIndex));
  exports.Set("tcAttach", Napi::Function::New(env, TcAttach));
  exports.Set("tcDetach", Napi::Function::New(env, TcDetach));
  exports.Set("tcQuery", Napi::Function::New(env, TcQuery));
  exports.Set("linkUpdate", Napi::Function::New(env, LinkUpdate));
  exports.Set("linkDetach", Napi::Function::New(env, LinkDetach));
  exports.Set("linkInfo", Napi::Function::New(env, LinkInfo));
  exports.Set("progInfo", Napi::Function::New(env, ProgInfo));
  exports.Set("mapInfo", Napi::Function::New(env, MapInfo));
  exports.Set("mapCreate", Napi::Function::New(env, MapCreate));
  exports.Set("mapGetFdById", Napi::Function::New(env, MapGetFdById));
  exports.Set("mapLookup", Napi::Function::New(env, MapLookup));
  exports.Set("mapUpdate", Napi::Function::New(env, MapUpdate));
  exports.Set("mapDelete", Napi::Function::New(env, MapDelete));
  exports.Set("mapDump", Napi::Function::New(env, MapDump));
  exports.Set("mapDumpBatch", Napi::Function::New(env, MapDumpBatch));
  exports.Set("mapUpdateBatch", Napi::Function::New(env, MapUpdateBatch));
  exports.Set("mapDeleteBatch", Napi::Function::New(env, MapDeleteBatch));
  exports.Set("mapUpdateEach", Napi::Function::New(env, MapUpdateEach));
  exports.Set("mapMmapWrite", Napi::Function::New(env, MapMmapWrite));
  exports.Set("mapMmapRead", Napi::Function::New(env, MapMmapRead));
  exports.Set("progTestRun", Napi::Function::New(env, ProgTestRun));
  exports.Set("numPossibleCpus", Napi::Function::New(env, NumPossibleCpus));
  exports.Set("btfStructs", Napi::Function::New(env, BtfStructs));
  exports.Set("btfLayout", Napi::Function::New(env, BtfLayout));
  exports.Set("libbpfVersion",
              Napi::String::New(env, std::to_string(libbpf_major_version()) + "." +
                                         std::to_string(libbpf_minor_version())));
  return exports;
}

}  // namespace

NODE_API_MODULE(switchyard_bpf, Init)
