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

#include "facts.h"

namespace {

using proclease::PackedSnapshot;
using proclease::ProcDetails;
using proclease::SignalResult;

Napi::Value ThrowType(Napi::Env env, const char* msg) {
  Napi::TypeError::New(env, msg).ThrowAsJavaScriptException();
  return env.Undefined();
}

bool IsInt(const Napi::Value& v) {
  if (!v.IsNumber()) return false;
  double d = v.As<Napi::Number>().DoubleValue();
  return d == static_cast<double>(static_cast<long long>(d)) && d >= -2147483648.0 && d <= 2147483647.0;
}

class SnapshotWorker : public Napi::AsyncWorker {
 public:
  SnapshotWorker(Napi::Env env, bool uidFromStatus)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), uidFromStatus_(uidFromStatus) {}

  Napi::Promise Promise() const { return deferred_.Promise(); }

 protected:
  // libuv worker thread: no JS access here.
  void Execute() override {
    int rc = proclease::WalkProcesses(snap_, uidFromStatus_);
    if (rc != 0) {
      std::string msg = "cannot list processes: ";
      msg += strerror(-rc);
      SetError(msg);
    }
  }

  // Main thread: two memcpy's into fresh ArrayBuffers, nothing per record.
  void OnOK() override {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    const size_t n = snap_.count;
    Napi::ArrayBuffer intBuf = Napi::ArrayBuffer::New(env, n * proclease::kIntFields * sizeof(int32_t));
    Napi::ArrayBuffer startBuf = Napi::ArrayBuffer::New(env, n * sizeof(double));
    if (n > 0) {
      memcpy(intBuf.Data(), snap_.ints.data(), n * proclease::kIntFields * sizeof(int32_t));
      memcpy(startBuf.Data(), snap_.starts.data(), n * sizeof(double));
    }
    Napi::Object out = Napi::Object::New(env);
    out.Set("count", Napi::Number::New(env, static_cast<double>(n)));
    out.Set("ints", Napi::Int32Array::New(env, n * proclease::kIntFields, intBuf, 0));
    out.Set("starts", Napi::Float64Array::New(env, n, startBuf, 0));
    deferred_.Resolve(out);
  }

  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  bool uidFromStatus_;
  PackedSnapshot snap_;
};

Napi::Value Snapshot(const Napi::CallbackInfo& info) {
  if (info.Length() > 0 && !info[0].IsBoolean() && !info[0].IsUndefined()) {
    return ThrowType(info.Env(), "snapshot(uidFromStatus?: boolean)");
  }
  const bool uidFromStatus = info.Length() > 0 && info[0].IsBoolean() && info[0].As<Napi::Boolean>().Value();
  auto* worker = new SnapshotWorker(info.Env(), uidFromStatus);  // deletes itself after OnOK/OnError
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

// inspect's fixed slots before the env values (see Inspect)
constexpr size_t kDetailsFixed = 12;

Napi::Value NullableString(Napi::Env env, bool has, const std::string& s) {
  return has ? Napi::String::New(env, s) : env.Null();
}

Napi::Value Inspect(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !IsInt(info[0]) || !info[1].IsArray()) {
    return ThrowType(env, "inspect(pid: int, envKeys: string[])");
  }
  int pid = info[0].As<Napi::Number>().Int32Value();
  Napi::Array keysArr = info[1].As<Napi::Array>();
  std::vector<std::string> keys;
  keys.reserve(keysArr.Length());
  for (uint32_t i = 0; i < keysArr.Length(); i++) {
    Napi::Value k = keysArr.Get(i);
    if (!k.IsString()) return ThrowType(env, "inspect: envKeys must be strings");
    keys.push_back(k.As<Napi::String>().Utf8Value());
  }

  ProcDetails d;
  if (!proclease::InspectProcess(pid, keys, d)) return env.Null();

  // A flat array (the layout of NativeDetails in native-binding.ts): set by
  // index, with no property name to create per call; the TS side builds the
  // one object callers see. This keeps inspect close to its syscall floor.
  const uint32_t n = static_cast<uint32_t>(kDetailsFixed + keys.size());
  Napi::Array out = Napi::Array::New(env, n);
  out.Set(0u, Napi::Number::New(env, d.rec.pid));
  out.Set(1u, Napi::Number::New(env, d.rec.ppid));
  out.Set(2u, Napi::Number::New(env, d.rec.pgid));
  out.Set(3u, Napi::Number::New(env, d.rec.sid));
  out.Set(4u, Napi::Number::New(env, d.rec.uid));
  out.Set(5u, Napi::Number::New(env, d.realUid));
  out.Set(6u, Napi::Number::New(env, d.rec.state));
  out.Set(7u, Napi::Number::New(env, d.rec.flags));
  out.Set(8u, Napi::Number::New(env, d.rec.start));
  out.Set(9u, NullableString(env, d.hasExe, d.exe));
  if (d.hasArgv) {
    Napi::Array argv = Napi::Array::New(env, d.argv.size());
    for (size_t i = 0; i < d.argv.size(); i++) argv.Set(static_cast<uint32_t>(i), Napi::String::New(env, d.argv[i]));
    out.Set(10u, argv);
  } else {
    out.Set(10u, env.Null());
  }
  out.Set(11u, Napi::Boolean::New(env, d.envReadable));
  // one value per requested key, in request order; null when absent
  for (size_t k = 0; k < keys.size(); k++) {
    Napi::Value v = env.Null();
    for (const auto& kv : d.env) {
      if (kv.first == keys[k]) {
        v = Napi::String::New(env, kv.second);
        break;
      }
    }
    out.Set(static_cast<uint32_t>(kDetailsFixed + k), v);
  }
  return out;
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

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("platform", Napi::String::New(env, proclease::PlatformName()));
  exports.Set("snapshot", Napi::Function::New(env, Snapshot, "snapshot"));
  exports.Set("inspect", Napi::Function::New(env, Inspect, "inspect"));
  exports.Set("bootId", Napi::Function::New(env, BootId, "bootId"));
  exports.Set("pidNamespace", Napi::Function::New(env, PidNamespace, "pidNamespace"));
  exports.Set("pidfdSupported", Napi::Function::New(env, PidfdSupported, "pidfdSupported"));
  exports.Set("signalIfSame", Napi::Function::New(env, SignalIfSame, "signalIfSame"));
  exports.Set("setChildSubreaper", Napi::Function::New(env, SetChildSubreaper, "setChildSubreaper"));
  exports.Set("setParentDeathSignal", Napi::Function::New(env, SetParentDeathSignal, "setParentDeathSignal"));
  exports.Set("reapChildren", Napi::Function::New(env, ReapChildren, "reapChildren"));
  exports.Set("lockExclusive", Napi::Function::New(env, LockExclusive, "lockExclusive"));
  return exports;
}

}  // namespace

NODE_API_MODULE(proclease, Init)
