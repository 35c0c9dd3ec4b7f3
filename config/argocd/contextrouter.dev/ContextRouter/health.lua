-- Argo CD health of a contextrouter.dev ContextRouter.
-- Healthy: Ready=True for the current generation (every replica runs the
-- current bundle). Degraded: the bundle cannot be built or written, the
-- rollout failed, or a Secret the router reads is missing. Progressing: anything the operator is still working on.
local hs = {}

local function condition(conditions, type)
  if conditions == nil then
    return nil
  end
  for _, c in ipairs(conditions) do
    if c.type == type then
      return c
    end
  end
  return nil
end

-- "Reason: message", the way kubectl shows a condition.
local function describe(c)
  local reason = c.reason or "Unknown"
  if c.message ~= nil and c.message ~= "" then
    return reason .. ": " .. c.message
  end
  return reason
end

local status = obj.status or {}
local ready = condition(status.conditions, "Ready")
local generation = obj.metadata.generation
if ready == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to report the Ready condition"
  return hs
end
-- A status written for an older spec says nothing about the current one.
local observed = status.observedGeneration or 0
if ready.observedGeneration ~= nil and ready.observedGeneration < observed then
  observed = ready.observedGeneration
end
if generation ~= nil and observed < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. generation ..
    " (the status describes generation " .. observed .. ")"
  return hs
end

if ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message or ""
  return hs
end
-- A Secret the router reads for itself (its Redis password) is missing: the
-- pods run, but what needs it fails until it exists.
if ready.status == "False" and (ready.reason == "RolloutFailed" or ready.reason == "SecretNotFound") then
  hs.status = "Degraded"
  hs.message = describe(ready)
  return hs
end
-- Not programmed: Programmed=False says why (the router is invalid, a
-- permission or the bundle does not compile, the bundle is too large, or
-- writing it failed); the last good bundle keeps serving meanwhile.
local programmed = condition(status.conditions, "Programmed")
if ready.status == "False" and ready.reason == "NotProgrammed" and programmed ~= nil and programmed.status == "False" then
  hs.status = "Degraded"
  hs.message = describe(programmed)
  return hs
end
-- DeploymentPending, RollingOut, ReplicasNotReady: the rollout is under way.
hs.status = "Progressing"
hs.message = describe(ready)
return hs
