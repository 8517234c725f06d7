// Marshalling only: JS values in, plain C++ structs to the OS files, JS
// values out. Built with NAPI_DISABLE_CPP_EXCEPTIONS: an OS failure is a
// value (null, -errno, an outcome string); a JS TypeError is thrown only for
// wrong argument types, which the TS layer rules out before calling.
//
// One exception to "never rejects": snapshot() rejects when the process table
// itself cannot be listed (/proc missing). An empty snapshot there would read
// as "every process is gone", which is the unsafe answer.
#include <napi.h>

#include <cstring>
#include <string>
#include <vector>

#include "addon.h"
#include "facts.h"

namespace {

using proclease::PackedSnapshot;
using proclease::ProcDetails;
using proclease::SignalResult;

using proclease::addon::IsInt;
using proclease::addon::ThrowType;

// Creates a typed array over a fresh copy of `v` (the worker's vectors die with it).
template <typename T, typename Array>
Array CopyToTyped(Napi::Env env, const std::vector<T>& v) {
  Napi::ArrayBuffer buf = Napi::ArrayBuffer::New(env, v.size() * sizeof(T));
  if (!v.empty()) memcpy(buf.Data(), v.data(), v.size() * sizeof(T));
  return Array::New(env, v.size(), buf, 0);
}

class SnapshotWorker : public proclease::addon::PromiseWorker {
 public:
  explicit SnapshotWorker(Napi::Env env) : PromiseWorker(env) {}

 protected:
  // libuv worker thread: no JS access here. The walk and its indexes.
  void Execute() override {
    int rc = proclease::WalkProcesses(snap_);
    if (rc != 0) {
      std::string msg = "cannot list processes: ";
      msg += strerror(-rc);
      SetError(msg);
      return;
    }
    proclease::BuildSnapshotIndex(snap_);
  }

  // Main thread: three memcpy's into fresh ArrayBuffers, nothing per record.
  void OnOK() override {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    Napi::Object out = Napi::Object::New(env);
    out.Set("count", Napi::Number::New(env, static_cast<double>(snap_.count)));
    out.Set("ints", CopyToTyped<int32_t, Napi::Int32Array>(env, snap_.ints));
    out.Set("starts", CopyToTyped<double, Napi::Float64Array>(env, snap_.starts));
    out.Set("index", CopyToTyped<int32_t, Napi::Int32Array>(env, snap_.index));
    deferred_.Resolve(out);
  }

 private:
  PackedSnapshot snap_;
};

Napi::Value Snapshot(const Napi::CallbackInfo& info) {
  auto* worker = new SnapshotWorker(info.Env());  // deletes itself after OnOK/OnError
  return proclease::addon::Start(worker);
}

// One inspected process as plain data (layout: NativeDetailSlots in
// native-binding.ts): kSlotsFixed numbers, then one 0/1 per requested key;
// its strings (exe if any, each argv element, each present env value in key
// order) are appended to `text`, each followed by a NUL, which none of them
// can contain. Numbers in a Float64Array and one string for all text keep
// the marshalling to a handful of N-API calls however many fields there are.
constexpr size_t kSlotsFixed = 13;

// slots[0]: 1 found, 0 gone, -errno when the host refused the read (InspectProcess).
void PackDetails(int found, const ProcDetails& d, const std::vector<std::string>& keys, double* slots, std::string& text) {
  slots[0] = found;
  if (found != proclease::kInspectFound) return;
  slots[1] = d.rec.pid;
  slots[2] = d.rec.ppid;
  slots[3] = d.rec.pgid;
  slots[4] = d.rec.sid;
  slots[5] = d.rec.uid;
  slots[6] = d.realUid;
  slots[7] = d.rec.state;
  slots[8] = d.rec.flags;
  slots[9] = d.rec.start;
  slots[10] = d.hasExe ? 1 : 0;
  slots[11] = d.hasArgv ? static_cast<double>(d.argv.size()) : -1;
  slots[12] = d.envReadable ? 1 : 0;
  if (d.hasExe) text.append(d.exe).push_back('\0');
  for (const auto& a : d.argv) text.append(a).push_back('\0');
  for (size_t k = 0; k < keys.size(); k++) {
    slots[kSlotsFixed + k] = 0;
    for (const auto& kv : d.env) {
      if (kv.first == keys[k]) {
        slots[kSlotsFixed + k] = 1;
        text.append(kv.second).push_back('\0');
        break;
      }
    }
  }
}

// Requested env keys arrive as one NUL-joined string ("" = none).
std::vector<std::string> SplitKeys(const std::string& joined) {
  std::vector<std::string> keys;
  if (joined.empty()) return keys;
  size_t from = 0;
  for (;;) {
    size_t nul = joined.find('\0', from);
    keys.push_back(joined.substr(from, nul == std::string::npos ? std::string::npos : nul - from));
    if (nul == std::string::npos) return keys;
    from = nul + 1;
  }
}

// The split keys of a synchronous inspect: callers ask with the same keys
// call after call, so the last joined string and its split are kept (per
// thread: a worker_threads isolate may call too), and a call with the same
// keys allocates nothing for them.
const std::vector<std::string>& InspectKeys(Napi::Env env, const Napi::Value& joined) {
  thread_local std::string lastJoined;
  thread_local std::vector<std::string> lastKeys;
  char buf[256];
  size_t len = 0;
  if (napi_get_value_string_utf8(env, joined, buf, sizeof buf, &len) == napi_ok && len < sizeof buf - 1) {
    if (len == lastJoined.size() && memcmp(buf, lastJoined.data(), len) == 0) return lastKeys;
    lastJoined.assign(buf, len);
  } else {
    lastJoined = joined.As<Napi::String>().Utf8Value();
  }
  lastKeys = SplitKeys(lastJoined);
  return lastKeys;
}

// inspect(pid, keys, slots): synchronous; fills slots (a Float64Array of at
// least kSlotsFixed + key count) and returns the text, null when the process
// does not exist, or -errno when the host refused a read that decides it.
Napi::Value Inspect(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 3 || !IsInt(info[0]) || !info[1].IsString() || !info[2].IsTypedArray()) {
    return ThrowType(env, "inspect(pid: int, envKeys: string, slots: Float64Array)");
  }
  const std::vector<std::string>& keys = InspectKeys(env, info[1]);
  // one napi_get_typedarray_info (node-addon-api's accessors each make their own)
  napi_typedarray_type type;
  size_t length = 0;
  void* data = nullptr;
  if (napi_get_typedarray_info(env, info[2], &type, &length, &data, nullptr, nullptr) != napi_ok ||
      type != napi_float64_array || length < kSlotsFixed + keys.size()) {
    return ThrowType(env, "inspect: slots must be a Float64Array of 13 + envKeys.length");
  }
  // kept per thread between calls: a repeated inspect allocates no vectors or text buffer
  thread_local ProcDetails d;
  thread_local std::string text;
  d.Clear();
  text.clear();
  const int found = proclease::InspectProcess(info[0].As<Napi::Number>().Int32Value(), keys, d, false);
  if (found < 0) return Napi::Number::New(env, found);  // -errno: the TS side throws FactsReadError
  if (found == proclease::kInspectGone) return env.Null();
  PackDetails(found, d, keys, static_cast<double*>(data), text);
  return Napi::String::New(env, text);
}

class InspectManyWorker : public proclease::addon::PromiseWorker {
 public:
  InspectManyWorker(Napi::Env env, std::vector<int> pids, std::vector<std::string> keys, bool listed)
      : PromiseWorker(env), pids_(std::move(pids)), keys_(std::move(keys)), listed_(listed) {}

 protected:
  // libuv worker thread: each pid on its own; one that is gone is found = 0.
  void Execute() override {
    const size_t stride = kSlotsFixed + keys_.size();
    slots_.assign(pids_.size() * stride, 0);
    for (size_t i = 0; i < pids_.size(); i++) {
      ProcDetails d;
      const int found = proclease::InspectProcess(pids_[i], keys_, d, listed_);
      PackDetails(found, d, keys_, slots_.data() + i * stride, text_);
    }
  }

  void OnOK() override {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    Napi::Object out = Napi::Object::New(env);
    out.Set("slots", CopyToTyped<double, Napi::Float64Array>(env, slots_));
    out.Set("text", Napi::String::New(env, text_));
    deferred_.Resolve(out);
  }

 private:
  std::vector<int> pids_;
  std::vector<std::string> keys_;
  bool listed_;
  std::vector<double> slots_;
  std::string text_;
};

// inspectMany(pids, keys, listed): one worker-thread job for every pid;
// listed as InspectProcess's (facts.h).
Napi::Value InspectMany(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 3 || !info[0].IsTypedArray() || !info[1].IsString() || !info[2].IsBoolean()) {
    return ThrowType(env, "inspectMany(pids: Int32Array, envKeys: string, listed: boolean)");
  }
  Napi::TypedArray ta = info[0].As<Napi::TypedArray>();
  if (ta.TypedArrayType() != napi_int32_array) return ThrowType(env, "inspectMany: pids must be an Int32Array");
  Napi::Int32Array arr = ta.As<Napi::Int32Array>();
  std::vector<int> pids(arr.Data(), arr.Data() + arr.ElementLength());
  auto* worker = new InspectManyWorker(env, std::move(pids), SplitKeys(info[1].As<Napi::String>().Utf8Value()), info[2].As<Napi::Boolean>().Value());
  return proclease::addon::Start(worker);
}

Napi::Value NullableString(Napi::Env env, bool has, const std::string& s) {
  return has ? Napi::String::New(env, s) : env.Null();
}

Napi::Value BootId(const Napi::CallbackInfo& info) {
  std::string s;
  return NullableString(info.Env(), proclease::BootId(s), s);
}

Napi::Value PidNamespace(const Napi::CallbackInfo& info) {
  std::string s;
  return NullableString(info.Env(), proclease::PidNamespace(s), s);
}

Napi::Value PidfdSupported(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), proclease::PidfdSupported());
}

const char* OutcomeName(SignalResult r) {
  switch (r) {
    case SignalResult::kSignalled: return "signalled";
    case SignalResult::kGone: return "gone";
    case SignalResult::kMismatch: return "mismatch";
    case SignalResult::kDenied: return "denied";
    case SignalResult::kUnsupported: break;
  }
  return "unsupported";
}

Napi::Value SignalIfSame(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 3 || !IsInt(info[0]) || !info[1].IsNumber() || !IsInt(info[2])) {
    return ThrowType(env, "signalIfSame(pid: int, expectedStart: number, signal: int)");
  }
  SignalResult r = proclease::SignalIfSame(info[0].As<Napi::Number>().Int32Value(),
                                           info[1].As<Napi::Number>().DoubleValue(),
                                           info[2].As<Napi::Number>().Int32Value());
  return Napi::String::New(env, OutcomeName(r));
}

Napi::Value SetChildSubreaper(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), proclease::SetChildSubreaper());
}

Napi::Value SetParentDeathSignal(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !IsInt(info[0])) return ThrowType(env, "setParentDeathSignal(signal: int)");
  return Napi::Number::New(env, proclease::SetParentDeathSignal(info[0].As<Napi::Number>().Int32Value()));
}

// sealedCopy(name, bytes): the memfd's descriptor, or -errno (exec_guard_linux.cc)
Napi::Value SealedCopy(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsString() || !info[1].IsBuffer())
    return ThrowType(env, "sealedCopy(name: string, bytes: Buffer)");
  std::string name = info[0].As<Napi::String>().Utf8Value();
  Napi::Buffer<unsigned char> bytes = info[1].As<Napi::Buffer<unsigned char>>();
  return Napi::Number::New(env, proclease::SealedCopy(name.c_str(), bytes.Data(), bytes.Length()));
}

Napi::Value SetMmapThreshold(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !IsInt(info[0]) || info[0].As<Napi::Number>().Int32Value() < 0) return ThrowType(env, "setMmapThreshold(bytes: non-negative int)");
  return Napi::Number::New(env, proclease::SetMmapThreshold(info[0].As<Napi::Number>().Int32Value()));
}

// malloc_trim walks every arena and madvises their free pages: 11-14 ms for
// 128 MiB of free fragments here, so it runs on a pool thread.
class TrimWorker : public proclease::addon::PromiseWorker {
 public:
  explicit TrimWorker(Napi::Env env) : PromiseWorker(env) {}

 protected:
  void Execute() override { rc_ = proclease::TrimMalloc(); }
  void OnOK() override { deferred_.Resolve(Napi::Number::New(Env(), rc_)); }

 private:
  int rc_ = 0;
};

// trimMalloc() → Promise<number>
Napi::Value TrimMalloc(const Napi::CallbackInfo& info) { return proclease::addon::Start(new TrimWorker(info.Env())); }

Napi::Value SetDumpable(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsBoolean()) return ThrowType(env, "setDumpable(on: boolean)");
  return Napi::Number::New(env, proclease::SetDumpable(info[0].As<Napi::Boolean>().Value()));
}

Napi::Value GetDumpable(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), proclease::GetDumpable());
}

Napi::Value UnshareCgroupNamespace(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), proclease::UnshareCgroupNamespace());
}

Napi::Value ReapChildren(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsArray()) return ThrowType(env, "reapChildren(pids: int[])");
  Napi::Array pids = info[0].As<Napi::Array>();
  std::vector<int> reaped;
  for (uint32_t i = 0; i < pids.Length(); i++) {
    Napi::Value v = pids.Get(i);
    if (!IsInt(v)) return ThrowType(env, "reapChildren: pids must be integers");
    int pid = v.As<Napi::Number>().Int32Value();
    if (pid > 0 && proclease::ReapChild(pid)) reaped.push_back(pid);
  }
  Napi::Array out = Napi::Array::New(env, reaped.size());
  for (size_t i = 0; i < reaped.size(); i++) out.Set(static_cast<uint32_t>(i), Napi::Number::New(env, reaped[i]));
  return out;
}

Napi::Value LockExclusive(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !IsInt(info[0])) return ThrowType(env, "lockExclusive(fd: int)");
  return Napi::Number::New(env, proclease::LockExclusive(info[0].As<Napi::Number>().Int32Value()));
}

// connectAttach(dir, name): {fd, pid, uid} of a connected Unix socket, or -errno (attach_linux.cc)
Napi::Value ConnectAttach(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsString() || !info[1].IsString())
    return ThrowType(env, "connectAttach(dir: string, name: string)");
  std::string dir = info[0].As<Napi::String>().Utf8Value(), name = info[1].As<Napi::String>().Utf8Value();
  int pid = 0, uid = -1;
  int fd = proclease::ConnectAttach(dir.c_str(), name.c_str(), &pid, &uid);
  if (fd < 0) return Napi::Number::New(env, fd);
  Napi::Object out = Napi::Object::New(env);
  out.Set("fd", Napi::Number::New(env, fd));
  out.Set("pid", Napi::Number::New(env, pid));
  out.Set("uid", Napi::Number::New(env, uid));
  return out;
}

Napi::Value ThreadCpuTimeNs(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), proclease::ThreadCpuTimeNs());
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("platform", Napi::String::New(env, proclease::PlatformName()));
  exports.Set("snapshot", Napi::Function::New(env, Snapshot, "snapshot"));
  exports.Set("inspect", Napi::Function::New(env, Inspect, "inspect"));
  exports.Set("inspectMany", Napi::Function::New(env, InspectMany, "inspectMany"));
  exports.Set("bootId", Napi::Function::New(env, BootId, "bootId"));
  exports.Set("pidNamespace", Napi::Function::New(env, PidNamespace, "pidNamespace"));
  exports.Set("pidfdSupported", Napi::Function::New(env, PidfdSupported, "pidfdSupported"));
  exports.Set("signalIfSame", Napi::Function::New(env, SignalIfSame, "signalIfSame"));
  exports.Set("setChildSubreaper", Napi::Function::New(env, SetChildSubreaper, "setChildSubreaper"));
  exports.Set("setParentDeathSignal", Napi::Function::New(env, SetParentDeathSignal, "setParentDeathSignal"));
  exports.Set("unshareCgroupNamespace", Napi::Function::New(env, UnshareCgroupNamespace, "unshareCgroupNamespace"));
  exports.Set("reapChildren", Napi::Function::New(env, ReapChildren, "reapChildren"));
  exports.Set("sealedCopy", Napi::Function::New(env, SealedCopy, "sealedCopy"));
  exports.Set("setDumpable", Napi::Function::New(env, SetDumpable, "setDumpable"));
  exports.Set("setMmapThreshold", Napi::Function::New(env, SetMmapThreshold, "setMmapThreshold"));
  exports.Set("trimMalloc", Napi::Function::New(env, TrimMalloc, "trimMalloc"));
  exports.Set("getDumpable", Napi::Function::New(env, GetDumpable, "getDumpable"));
  exports.Set("lockExclusive", Napi::Function::New(env, LockExclusive, "lockExclusive"));
  exports.Set("connectAttach", Napi::Function::New(env, ConnectAttach, "connectAttach"));
  exports.Set("threadCpuTimeNs", Napi::Function::New(env, ThreadCpuTimeNs, "threadCpuTimeNs"));
  proclease::addon::ExportFileJobs(env, exports);
  proclease::addon::ExportBeneathJobs(env, exports);
  return exports;
}

}  // namespace

NODE_API_MODULE(proclease, Init)
