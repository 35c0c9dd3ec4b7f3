-- Argo CD health of a contextrouter.dev ContextSource.
-- Healthy: Ready=True for the current generation. Degraded: the spec is
-- invalid, or its volume cannot be mounted in a router pod that uses it
-- (InvalidMount; status.excludedBy names the routers). Progressing: a
-- Secret, ConfigMap or PersistentVolumeClaim it reads does not exist yet;
-- GitOps tools (and secret operators) create objects in any order, so a
-- missing reference is waited for.
local hs = {}

local terminal = {InvalidSpec = true, InvalidMount = true}

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
elseif ready.status == "False" and terminal[ready.reason] then
  hs.status = "Degraded"
  hs.message = describe(ready)
else
  -- SecretNotFound, ConfigMapNotFound, PersistentVolumeClaimNotFound.
  hs.status = "Progressing"
  hs.message = describe(ready)
end
return hs
