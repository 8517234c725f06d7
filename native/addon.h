// What the addon's marshalling files share (addon.cc, file_jobs.cc).
#pragma once

#include <napi.h>

namespace proclease::addon {

// Throws a TypeError naming the call's expected shape; the TS layer rules
// such calls out, so this only guards against a caller that skipped it.
inline Napi::Value ThrowType(Napi::Env env, const char* msg) {
  Napi::TypeError::New(env, msg).ThrowAsJavaScriptException();
  return env.Undefined();
}

inline bool IsInt(const Napi::Value& v) {
  if (!v.IsNumber()) return false;
  double d = v.As<Napi::Number>().DoubleValue();
  return d == static_cast<double>(static_cast<long long>(d)) && d >= -2147483648.0 && d <= 2147483647.0;
}

// A thread-pool job that settles a promise: the subclass works in Execute
// (no JS there) and resolves deferred_ in OnOK; a failure of the job
// itself rejects. It deletes itself once settled.
class PromiseWorker : public Napi::AsyncWorker {
 public:
  explicit PromiseWorker(Napi::Env env) : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)) {}

  Napi::Promise Promise() const { return deferred_.Promise(); }

 protected:
  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

  Napi::Promise::Deferred deferred_;
};

// Queues the job and returns its promise.
inline Napi::Value Start(PromiseWorker* worker) {
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

// readSmallFiles, replaceFile, removeFile and moveFile (file_jobs.cc).
void ExportFileJobs(Napi::Env env, Napi::Object exports);

// readBeneath and writeBeneath (beneath_jobs.cc).
void ExportBeneathJobs(Napi::Env env, Napi::Object exports);

}  // namespace proclease::addon
